/* Signals at arbitrary points: a timer interrupts a recursion every 50 us, anywhere in the
 * program's code or in the hooks' trampolines, and its handler runs a traced function.
 * Prints the calls of fib it made, the signals it took and fib's result. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

static volatile long calls, signals, sink;

__attribute__((noinline)) void handled(int n) { sink += n; }

static void on_alarm(int sig) {
    signals++;
    handled(sig);
}

/* Neither call is a tail call (the store after them), so each is a real call. */
__attribute__((noinline)) long fib(int n) {
    calls++;
    if (n < 2) return n;
    long r = fib(n - 1) + fib(n - 2);
    sink = r;
    return r;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 50}, {0, 50}};
    setitimer(ITIMER_REAL, &it, NULL);
    long r = 0;
    for (int i = 0; i < 3; i++) r += fib(22);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("%ld %ld %ld\n", calls, signals, r);
    return 0;
}
