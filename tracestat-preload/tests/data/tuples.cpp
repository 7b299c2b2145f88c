// A C++ library for a C host (`data/host.c`) that opens it RTLD_LOCAL: its C++ runtime
// (libstdc++) is loaded into that local scope, not the process's global one.
#include <tuple>
#include <vector>

extern "C" int plug(int n) {
  std::vector<std::tuple<int, int>> v;
  for (int i = 0; i < n; i++) v.emplace_back(i, i * 2);
  int s = 0;
  for (auto& t : v) s += std::get<1>(t);
  return s;
}
