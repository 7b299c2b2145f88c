// C++ exceptions unwinding through traced frames: 100 throws from 11 frames deep.
#include <cstdio>

struct Boom {};
static volatile int sink;

__attribute__((noinline)) void thrower(int n) {
    if (n == 0) throw Boom();
    thrower(n - 1);
    sink++;
}

__attribute__((noinline)) int leaf(int x) { sink += x; return x + 1; }

int main() {
    int caught = 0;
    for (int i = 0; i < 100; i++) {
        try {
            thrower(10);
        } catch (const Boom &) {
            caught++;
        }
        leaf(i);
    }
    std::printf("%d\n", caught);
    return caught == 100 ? 0 : 1;
}
