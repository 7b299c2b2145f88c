/* A shared object loaded with dlopen by cases.c. */
__attribute__((noinline)) static int twice(int x) { return 2 * x; }
int plug(int x) { return twice(x) + 1; }
