/* Loads a shared object (argv[1]) with dlopen mid-run, driven a round at a time by lines on
 * standard input: round 1 before the load, round 2 loads it and calls its `plug` 10 times,
 * round 3 calls it 5 times more. Counts its own calls of `plug`, printed at the end. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int (*plug)(int);
static long calls;
static volatile long sink;

__attribute__((noinline)) static void plugin_round(int n) {
    for (int i = 0; i < n; i++) {
        sink += plug(i);
        calls++;
    }
}

static void wait_line(void) {
    char line[64];
    if (!fgets(line, sizeof line, stdin)) exit(3);
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    wait_line();
    printf("round 1\n");
    fflush(stdout);
    wait_line();
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    plug = (int (*)(int))dlsym(h, "plug");
    plugin_round(10);
    printf("round 2\n");
    fflush(stdout);
    wait_line();
    plugin_round(5);
    printf("round 3\n");
    printf("plug calls %ld\n", calls);
    return 0;
}
