// Coroutines on stacks of their own (swapcontext), one in static memory and one in a
// mmap'd region: each produces 1000 values, yielding to main after each, while main's own
// calls (consume) run between them. Calls on a coroutine's stack return in an order the
// thread's own stack does not: `leaf` 6000 calls, `consume` 2000, `produce` 2000,
// `yield_to_main` 2000, `coroutine` 2, `main` 1; prints 34000.
#include <stdio.h>
#include <sys/mman.h>
#include <ucontext.h>

static ucontext_t main_ctx, co_ctx[2];
static long total;
static int current;

__attribute__((noinline)) long leaf(long x) { return x * 2 + 1; }
__attribute__((noinline)) void yield_to_main(void) { swapcontext(&co_ctx[current], &main_ctx); }
__attribute__((noinline)) void produce(long i) {
  total += leaf(i);
  yield_to_main();
  total += leaf(-i);
}
__attribute__((noinline)) void coroutine(void) {
  for (long i = 0; i < 1000; i++) produce(i);
}
__attribute__((noinline)) void consume(void) { total += leaf(7); }

int main(void) {
  static char fixed[1 << 16];
  enum { SIZE = 1 << 18 };
  char *mapped = mmap(0, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return 1;
  char *stacks[2] = {fixed, mapped};
  size_t sizes[2] = {sizeof fixed, SIZE};
  for (int k = 0; k < 2; k++) {
    getcontext(&co_ctx[k]);
    co_ctx[k].uc_stack.ss_sp = stacks[k];
    co_ctx[k].uc_stack.ss_size = sizes[k];
    co_ctx[k].uc_link = &main_ctx;
    makecontext(&co_ctx[k], coroutine, 0);
  }
  // Both coroutines in turn, each resumed once more to finish.
  for (int i = 0; i < 1001; i++)
    for (current = 0; current < 2; current++) {
      swapcontext(&main_ctx, &co_ctx[current]);
      if (i < 1000) consume();
    }
  printf("%ld\n", total);
  return 0;
}
