/* Four threads, each doing a different, known amount of work through several functions,
 * the main thread some of its own: every count is fixed by the program alone, whatever the
 * scheduling. Thread k (1..4) calls middle(10 k) 100 k times (each calls leaf 10 k times)
 * and fib(10 + k) once (its recursion sums through add). */
#include <pthread.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline, noipa))

NOINLINE long leaf(long x) { return x * 3 + 1; }
NOINLINE long add(long a, long b) { return a + b; }

NOINLINE long middle(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) s += leaf(i);
    return s;
}

NOINLINE long fib(long n) { return n < 2 ? n : add(fib(n - 1), fib(n - 2)); }

static long results[5];

NOINLINE void *worker(void *arg) {
    long k = (long)arg, s = 0;
    for (long i = 0; i < 100 * k; i++) s += middle(10 * k);
    results[k] = s + fib(10 + k);
    return NULL;
}

int main(void) {
    pthread_t t[5];
    for (long k = 1; k <= 4; k++) pthread_create(&t[k], NULL, worker, (void *)k);
    long own = middle(7);
    for (long k = 1; k <= 4; k++) pthread_join(t[k], NULL);
    printf("%ld %ld %ld %ld %ld\n", own, results[1], results[2], results[3], results[4]);
    return 0;
}
