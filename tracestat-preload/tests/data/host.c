// A C program that opens a C++ library (`data/tuples.cpp`) RTLD_LOCAL and calls it.
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  void *h = dlopen(argc > 1 ? argv[1] : "./libtuples.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    puts(dlerror());
    return 1;
  }
  int (*plug)(int) = (int (*)(int))dlsym(h, "plug");
  printf("%d\n", plug(100));
  return 0;
}
