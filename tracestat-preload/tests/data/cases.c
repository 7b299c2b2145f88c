/* The return stack's hard cases, one per mode (argv[1]); each prints what it counted itself,
 * so the test checks the profile against the program's own numbers. Every function is
 * noinline and rec's recursion is not a loop: a -pg build has hooks only in the functions
 * left after optimisation, -finstrument-functions in every one. */
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static jmp_buf jb;
static volatile int sink;

__attribute__((noinline)) int leaf(int x) { sink += x; return x + 1; }

__attribute__((noinline)) void dive(int n) {
    if (n == 0) longjmp(jb, 1);
    dive(n - 1);
    sink++;
}

/* 100 longjmps out of 21 frames each, with leaf calls in between at the depth of the
 * frames left behind. */
__attribute__((noinline)) static void longjmps(void) {
    for (int i = 0; i < 100; i++) {
        if (!setjmp(jb)) dive(20);
        leaf(i);
    }
}

/* A jump the interposed longjmp never sees (gcc's and clang's inline __builtin_longjmp):
 * jumpy's frame is left behind, and the leaf called next takes its return-address slot. */
static void *bjb[5];

__attribute__((noinline)) void jumpy(void) {
    sink++;
    __builtin_longjmp(bjb, 1);
}

/* 100 builtin jumps out of jumpy, each followed by a leaf call from the same place. */
__attribute__((noinline)) static void builtins(void) {
    for (int i = 0; i < 100; i++) {
        if (!__builtin_setjmp(bjb)) jumpy();
        leaf(i);
    }
}

__attribute__((noinline)) void handled(int n) { sink += n; }

static void on_signal(int sig) {
    for (int i = 0; i < 3; i++) handled(sig);
}

__attribute__((noinline)) void raiser(void) {
    raise(SIGUSR1);
    leaf(1);
}

/* 50 signals, each handler calling handled() 3 times on top of raiser's frame. */
__attribute__((noinline)) static void signals(void) {
    signal(SIGUSR1, on_signal);
    for (int i = 0; i < 50; i++) raiser();
}

static sigjmp_buf sjb;

__attribute__((noinline)) static void on_jump(int sig) {
    handled(sig);
    siglongjmp(sjb, 1);
}

__attribute__((noinline)) void jumper(void) {
    raise(SIGUSR2);
    leaf(2); /* never reached: the handler jumps out */
}

/* 50 signals whose handler leaves with siglongjmp, over its own frame and jumper's. */
__attribute__((noinline)) static void siglongjmps(void) {
    signal(SIGUSR2, on_jump);
    for (int i = 0; i < 50; i++) {
        if (!sigsetjmp(sjb, 1)) jumper();
        leaf(i);
    }
}

static sigjmp_buf ajb;
static volatile int alarms;

static void on_alarm(int sig) {
    (void)sig;
    alarms++;
    siglongjmp(ajb, 1);
}

__attribute__((noinline)) long twice(long x) { return leaf((int)x) + leaf((int)x + 1); }

/* n calls of twice, or calls without end for n < 0. */
__attribute__((noinline)) static void spinner(long n) {
    for (long i = 0; n < 0 || i < n; i++) sink += (int)twice(i);
}

/* SIGALRM to `handler` every `us` microseconds (0: the timer stopped). */
static void every(int us, void (*handler)(int)) {
    if (handler) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = handler;
        sigaction(SIGALRM, &sa, NULL);
    }
    struct itimerval it = {{0, us}, {0, us}};
    setitimer(ITIMER_REAL, &it, NULL);
}

/* A timer every 100 us whose handler leaves by siglongjmp, 300 times, from code that does
 * nothing but traced calls: the signal lands inside a hook (the handler's jump leaves it
 * half done), and the program must still end. Each function is called once before the
 * timer starts, so that no signal lands in a first call's setting up (which allocates:
 * jumping out of malloc breaks the heap, as it would in the program's own code). The timer
 * starts once the jump buffer is set: a signal before that (the process descheduled right
 * after starting it) would jump through a zeroed buffer. */
__attribute__((noinline)) static void alarmed(void) {
    volatile int started = 0;
    spinner(1);
    while (alarms < 300) {
        if (!sigsetjmp(ajb, 1)) {
            if (!started) {
                started = 1;
                every(100, on_alarm);
            }
            spinner(-1);
        }
    }
    every(0, NULL);
}

static volatile int ticks;

static void on_tick(int sig) {
    ticks++;
    handled(sig);
}

/* A timer every 50 us for 2000 signals whose handler calls handled(), interrupting code that
 * makes nothing but traced calls: a handler that runs while a hook runs is not traced, and the
 * note at exit counts it. Prints the handler's runs. */
__attribute__((noinline)) static void storm(void) {
    spinner(1);
    every(50, on_tick);
    while (ticks < 2000) twice(ticks);
    every(0, NULL);
    printf("ticks %d\n", ticks);
}

__attribute__((noinline)) void quit(void) { pthread_exit(NULL); }

__attribute__((noinline)) void *worker(void *arg) {
    for (int i = 0; i < 1000; i++) leaf(i);
    if (arg) quit();
    return NULL;
}

/* 4 threads of 1000 leaf calls; two end with pthread_exit inside quit(). */
__attribute__((noinline)) static void threads(void) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)(i % 2));
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
}

/* A thread ends the process with exit() from inside two calls (leaver, bye), while main
 * waits for it: the exiting thread's open calls end at the exit, as main's do when main
 * exits. */
__attribute__((noinline)) void bye(void) {
    printf("ok\n");
    exit(0);
}

__attribute__((noinline)) void *leaver(void *arg) {
    leaf(arg != NULL);
    bye();
    return NULL;
}

__attribute__((noinline)) static void exits(void) {
    pthread_t t;
    pthread_create(&t, NULL, leaver, NULL);
    pthread_join(t, NULL);
}

/* A thread parked three calls deep (held, nest x2, parked) in a cancellation point is
 * cancelled: its open calls end with it. */
static sem_t ready;

__attribute__((noinline)) void parked(void) {
    sem_post(&ready);
    for (;;) pause();
}

__attribute__((noinline)) void nest(int n) {
    if (n > 0) nest(n - 1);
    else parked();
    sink++;
}

__attribute__((noinline)) void *held(void *arg) {
    leaf(arg != NULL);
    nest(1);
    return NULL;
}

__attribute__((noinline)) static void cancels(void) {
    pthread_t t;
    void *result;
    sem_init(&ready, 0, 0);
    pthread_create(&t, NULL, held, NULL);
    while (sem_wait(&ready) != 0) {}
    pthread_cancel(t);
    pthread_join(t, &result);
    if (result != PTHREAD_CANCELED) exit(4);
}

/* The child calls leaf 500 times and exits; the parent 100 times. */
__attribute__((noinline)) static void forks(void) {
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 500; i++) leaf(i);
        exit(sink == 0 ? 3 : 0);
    }
    for (int i = 0; i < 100; i++) leaf(i);
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child failed\n");
        exit(1);
    }
}

__attribute__((noinline)) int rec(int n) {
    if (n == 0) return 0;
    int r = 1 + rec(n - 1);
    sink += r;
    return r;
}

/* Deeper than the return stack: the calls past it are overruns. */
__attribute__((noinline)) static void deep(void) { sink += rec(10000); }

/* A library loaded after start: 10 calls, closed, loaded again, 5 calls. */
__attribute__((noinline)) static void plugin(const char *path) {
    for (int round = 0; round < 2; round++) {
        void *h = dlopen(path, RTLD_NOW);
        if (!h) { fprintf(stderr, "%s\n", dlerror()); exit(1); }
        int (*plug)(int) = (int (*)(int))dlsym(h, "plug");
        for (int i = 0; i < (round == 0 ? 10 : 5); i++) sink += plug(i);
        dlclose(h);
    }
}

/* The resident set, in kB (-1 if unknown). */
static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = atol(line + 6);
    fclose(f);
    return kb;
}

/* A library loaded and closed `rounds` times, 3 calls each time; on stderr, how much the
   resident set grew from the first tenth of the rounds to the end (nothing said where it
   cannot be read). */
__attribute__((noinline)) static void reload(const char *path, int rounds) {
    long first = -1;
    for (int round = 0; round < rounds; round++) {
        if (round == rounds / 10) first = rss_kb();
        void *h = dlopen(path, RTLD_NOW);
        if (!h) { fprintf(stderr, "%s\n", dlerror()); exit(1); }
        int (*plug)(int) = (int (*)(int))dlsym(h, "plug");
        for (int i = 0; i < 3; i++) sink += plug(i);
        dlclose(h);
    }
    long last = rss_kb();
    if (first >= 0 && last >= 0) fprintf(stderr, "rss growth: %ld kB\n", last - first);
}

/* Calls, then the program again in place, in longjmp mode: the profile is the new image's. */
__attribute__((noinline)) static void execs(char **argv) {
    for (int i = 0; i < 10; i++) leaf(i);
    char *args[] = {argv[0], "longjmp", NULL};
    execv("/proc/self/exe", args);
    perror("execv");
    exit(1);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "longjmp")) longjmps();
    else if (!strcmp(argv[1], "builtin")) builtins();
    else if (!strcmp(argv[1], "signal")) signals();
    else if (!strcmp(argv[1], "siglongjmp")) siglongjmps();
    else if (!strcmp(argv[1], "alarm")) alarmed();
    else if (!strcmp(argv[1], "storm")) storm();
    else if (!strcmp(argv[1], "exec")) execs(argv);
    else if (!strcmp(argv[1], "threads")) threads();
    else if (!strcmp(argv[1], "fork")) forks();
    else if (!strcmp(argv[1], "exit")) exits();
    else if (!strcmp(argv[1], "cancel")) cancels();
    else if (!strcmp(argv[1], "deep")) deep();
    else if (!strcmp(argv[1], "dlopen") && argc == 3) plugin(argv[2]);
    else if (!strcmp(argv[1], "reload") && argc == 4) reload(argv[2], atoi(argv[3]));
    else return 2;
    printf("ok\n");
    return 0;
}
