// C++ exceptions unwinding through traced frames: 100 throws from 11 frames deep, each
// frame's destructor running a traced function on the way (a cleanup that unwinds on), a
// traced function catching them all and rethrowing every other one to main.
#include <cstdio>

struct Boom {};
static volatile int sink;

__attribute__((noinline)) void cleanup() { sink++; }

struct Guard {
    __attribute__((noinline)) ~Guard() { cleanup(); }
};

__attribute__((noinline)) void thrower(int n) {
    Guard g;
    if (n == 0) throw Boom();
    thrower(n - 1);
    sink++;
}

__attribute__((noinline)) int leaf(int x) { sink += x; return x + 1; }

__attribute__((noinline)) int catcher(int i) {
    try {
        thrower(10);
    } catch (const Boom &) {
        leaf(i);
        if (i % 2) throw;
        return 1;
    }
    return 0;
}

int main() {
    int caught = 0;
    for (int i = 0; i < 100; i++) {
        try {
            caught += catcher(i);
        } catch (const Boom &) {
            caught++;
        }
        leaf(i);
    }
    std::printf("%d\n", caught);
    return caught == 100 ? 0 : 1;
}
