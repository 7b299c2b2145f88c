/* XRay sleds of every kind: entries, several exits (two_exits), a tail call (tail's call of
 * leaf, after its sled), a conditional tail call (cond_tail's of callee) on whose other way
 * r10 holds a live value. Each function counts its own calls and main prints the counts, so
 * the test checks the profile against the program's own numbers, and its results against
 * those it prints run alone. */
#include <stdio.h>

static volatile long n_add, n_fib, n_leaf, n_tail, n_two, n_cond, n_callee;

__attribute__((noinline)) long add(long a, long b) { n_add++; return a + b; }

__attribute__((noinline)) long fib(long n) {
    n_fib++;
    return n < 2 ? n : add(fib(n - 1), fib(n - 2));
}

__attribute__((noinline)) long leaf(long x) { n_leaf++; return x * 7 + 1; }

__attribute__((noinline)) long tail(long x) { n_tail++; return leaf(x + 1); }

__attribute__((noinline)) long two_exits(long x) {
    n_two++;
    if (x & 1) return add(x, 1) * 3;
    return x / 2;
}

__attribute__((noinline)) long callee(long x) { n_callee++; return x * 5; }

/* clang makes `if (...) return callee(x);` a conditional tail call when optimizing for
 * size, its tail-call sled before the conditional jump; `keep` is in r10 on the other way,
 * past the sled, which must leave it as it was. */
__attribute__((noinline, minsize)) long cond_tail(long x, long y) {
    n_cond++;
    register long keep __asm__("r10") = y * 3;
    __asm__ volatile("" : "+r"(keep));
    if (x > 100) return callee(x);
    __asm__ volatile("" : "+r"(keep));
    return keep + x;
}

int main(void) {
    long s = 0, c = 0;
    for (long i = 0; i < 1000; i++) s += leaf(i) + tail(i) + two_exits(i);
    for (long i = 0; i < 1000; i++) c += cond_tail(i, i + 1);
    long f = fib(20);
    printf("%ld %ld %ld %ld %ld %ld %ld %ld %ld %ld\n", f, s, c, n_fib, n_add, n_leaf, n_tail,
           n_two, n_cond, n_callee);
    return 0;
}
