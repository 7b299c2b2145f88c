/* Arguments and return values through the hooks: every function's result depends on every
 * argument register it takes (six integers, eight doubles, vectors, a variadic call's count
 * of vector registers in al) and is checked against the same computation made without a
 * call. Prints "ok", or what differed. Each function is called CALLS times, so that a hook's
 * cached path (not only its first call) carries the registers. */
#include <stdarg.h>
#include <stdio.h>

#define CALLS 1000

typedef float v4 __attribute__((vector_size(16)));

__attribute__((noinline)) double mix(long a, long b, long c, long d, long e, long f, double x0,
                                     double x1, double x2, double x3, double x4, double x5,
                                     double x6, double x7) {
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * x0 + 8 * x1 + 9 * x2 + 10 * x3 +
           11 * x4 + 12 * x5 + 13 * x6 + 14 * x7;
}

static volatile int relayed;

/* A tail call carrying every argument register on (a tail-call sled's hook, XRay, or a
 * jump to a hooked entry, -pg): its hook must keep them all for the callee. */
__attribute__((noinline)) double relay(long a, long b, long c, long d, long e, long f, double x0,
                                       double x1, double x2, double x3, double x4, double x5,
                                       double x6, double x7) {
    relayed++;
    return mix(a, b, c, d, e, f, x0, x1, x2, x3, x4, x5, x6, x7);
}

__attribute__((noinline)) double weigh(int n, ...) {
    va_list ap;
    va_start(ap, n);
    double s = 0;
    for (int i = 0; i < n; i++) s += va_arg(ap, double) * (i + 1);
    va_end(ap);
    return s;
}

__attribute__((noinline)) v4 fma4(v4 a, v4 b, v4 c, v4 d, v4 e, v4 f, v4 g, v4 h) {
    return a * b + c * d + e * f + g * h;
}

static volatile double seed = 1.25;
static volatile long iseed = 3;

int main(void) {
    int bad = 0;
    for (int i = 0; i < CALLS; i++) {
        long k = iseed + i;
        double x = seed + i;
        double got = mix(k, k + 1, k + 2, k + 3, k + 4, k + 5, x, x + 1, x + 2, x + 3, x + 4,
                         x + 5, x + 6, x + 7);
        double want = k + 2 * (k + 1) + 3 * (k + 2) + 4 * (k + 3) + 5 * (k + 4) + 6 * (k + 5) +
                      7 * x + 8 * (x + 1) + 9 * (x + 2) + 10 * (x + 3) + 11 * (x + 4) +
                      12 * (x + 5) + 13 * (x + 6) + 14 * (x + 7);
        if (got != want && bad++ < 3) printf("mix(%d): %g, not %g\n", i, got, want);
        got = relay(k, k + 1, k + 2, k + 3, k + 4, k + 5, x, x + 1, x + 2, x + 3, x + 4, x + 5,
                    x + 6, x + 7);
        if (got != want && bad++ < 3) printf("relay(%d): %g, not %g\n", i, got, want);

        got = weigh(8, x, x + 1, x + 2, x + 3, x + 4, x + 5, x + 6, x + 7);
        want = x + 2 * (x + 1) + 3 * (x + 2) + 4 * (x + 3) + 5 * (x + 4) + 6 * (x + 5) +
               7 * (x + 6) + 8 * (x + 7);
        if (got != want && bad++ < 3) printf("weigh(%d): %g, not %g\n", i, got, want);

        float y = (float)seed + (float)(i % 7);
        v4 a = {y, y + 1, y + 2, y + 3}, b = a + 1, c = a + 2, d = a + 3;
        v4 r = fma4(a, b, c, d, d, c, b, a);
        v4 w = a * b + c * d + d * c + b * a;
        for (int j = 0; j < 4; j++)
            if (r[j] != w[j] && bad++ < 3) printf("fma4(%d)[%d]: %g, not %g\n", i, j, r[j], w[j]);
    }
    if (!bad) printf("ok\n");
    return bad != 0;
}
