/* XRay sleds of every kind: entries, several exits (two_exits), a tail call (tail's call of
 * leaf, after its sled). Each function counts its own calls and main prints the counts, so
 * the test checks the profile against the program's own numbers. */
#include <stdio.h>

static volatile long n_add, n_fib, n_leaf, n_tail, n_two;

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

int main(void) {
    long s = 0;
    for (long i = 0; i < 1000; i++) s += leaf(i) + tail(i) + two_exits(i);
    long f = fib(20);
    printf("%ld %ld %ld %ld %ld %ld %ld\n", f, s, n_fib, n_add, n_leaf, n_tail, n_two);
    return 0;
}
