/* Exit hooks run at another stack pointer than their entry hooks, and functions inlined
 * into others (built with each instrumentation; for timed runs, whose call paths follow the
 * frames):
 *   walk    a void recursion: gcc and clang jump to __cyg_profile_func_exit in place of the
 *           function's `ret`, with its frame popped, at its caller's stack pointer
 *   arrays  functions with a variable-length array and with alloca'd bytes, whose exit hook
 *           gcc calls below the entry's stack pointer, each followed by a call of a function
 *           with a large frame (its entry hook's stack pointer lower still)
 *   inline  a function inlined into another (gcc and clang instrument both, at one stack
 *           pointer and with one call site), then a real call from the outer one
 *   pushed  a function with a frame larger than the exit's search for its return slot,
 *           into which a function is inlined whose last call takes stack arguments: gcc
 *           calls both exit hooks with those arguments still pushed, below their entries'
 *           stack pointer, then a real call from the outer one */
#include <alloca.h>
#include <stdio.h>
#include <string.h>

static volatile int sink;

__attribute__((noinline)) void spin(int n) {
    for (int i = 0; i < n; i++) sink++;
}

__attribute__((noinline)) void walk(int d) {
    if (d == 0) {
        spin(20000);
        return;
    }
    walk(d - 1);
    walk(d - 1);
    sink++;
}

__attribute__((noinline)) void fill(char *p, int n) {
    for (int i = 0; i < n; i++) p[i] = (char)(i + sink);
}

__attribute__((noinline)) int vla(int n) {
    char b[n];
    fill(b, n);
    return b[n - 1];
}

__attribute__((noinline)) int grown(int n) {
    char *b = alloca(n);
    fill(b, n);
    return b[n - 1];
}

__attribute__((noinline)) int big(int x) {
    volatile char buf[512];
    buf[x & 511] = (char)x;
    return buf[(x + 1) & 511];
}

__attribute__((noinline)) int arrays(int n) {
    int s = vla(n);
    s += big(s);
    s += grown(n);
    return s + big(s);
}

static inline __attribute__((always_inline)) int square(int x) {
    sink += x;
    return x * x;
}

__attribute__((noinline)) int leaf(int x) { return x + sink; }

__attribute__((noinline)) int outer(int x) {
    int s = square(x);
    return s + leaf(s);
}

__attribute__((noinline)) long eight(long a, long b, long c, long d, long e, long f, long g,
                                     long h) {
    return a + b + c + d + e + f + g + h + sink;
}

__attribute__((noinline)) long after(long x) { return x + sink; }

static inline __attribute__((always_inline)) long eights(long x) {
    return eight(x, 1, 2, 3, 4, 5, 6, 7);
}

__attribute__((noinline)) long huge(long x) {
    volatile char buf[6000];
    buf[x % 6000] = (char)x;
    long r = eights(x);
    r += after(r);
    return r + buf[0];
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    int s = 0;
    if (!strcmp(mode, "walk"))
        walk(5);
    else if (!strcmp(mode, "arrays"))
        for (int i = 0; i < 10; i++) s += arrays(8 * i + 8);
    else if (!strcmp(mode, "inline"))
        for (int i = 0; i < 10; i++) s += outer(i);
    else if (!strcmp(mode, "pushed"))
        for (int i = 0; i < 10; i++) s += (int)huge(i);
    else {
        fprintf(stderr, "usage: tails walk|arrays|inline|pushed\n");
        return 2;
    }
    printf("ok\n");
    return s == 12345;
}
