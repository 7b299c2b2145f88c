/* Calls that nest, for timed runs: main calls outer 1000 times, outer calls inner 10 times. */
#include <stdio.h>

static volatile int sink;

__attribute__((noinline)) int inner(int x) {
    for (int i = 0; i < 100; i++) sink += x;
    return sink;
}

__attribute__((noinline)) int outer(int x) {
    int s = 0;
    for (int i = 0; i < 10; i++) s += inner(x + i);
    return s;
}

int main(void) {
    int s = 0;
    for (int i = 0; i < 1000; i++) s += outer(i);
    printf("%d\n", s != 12345);
    return 0;
}
