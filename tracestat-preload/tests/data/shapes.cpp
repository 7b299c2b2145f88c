// A C++ program in the standard library's templates: virtual calls through unique_ptr,
// std::sort with a lambda, std::map of std::string, std::function, a function template.
// Its functions' names are what C++ demangling gets wrong most easily: integer template
// arguments (std::tuple's indices), empty parameter packs, lambdas, anonymous namespaces.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {
struct Shape {
  virtual ~Shape() {}
  virtual double area() const = 0;
};
struct Square : Shape {
  double s;
  explicit Square(double s) : s(s) {}
  double area() const override { return s * s; }
};
struct Circle : Shape {
  double r;
  explicit Circle(double r) : r(r) {}
  double area() const override { return 3.14 * r * r; }
};
}  // namespace

template <typename T>
__attribute__((noinline)) T total(const std::vector<T>& v) {
  T t{};
  for (auto& x : v) t += x;
  return t;
}

std::string name_of(int i) { return "item" + std::to_string(i); }

int main() {
  std::vector<std::unique_ptr<Shape>> shapes;
  for (int i = 0; i < 100; i++) {
    if (i % 3)
      shapes.push_back(std::make_unique<Square>(i));
    else
      shapes.push_back(std::make_unique<Circle>(i));
  }
  std::vector<double> areas;
  for (auto& s : shapes) areas.push_back(s->area());
  std::sort(areas.begin(), areas.end(), [](double a, double b) { return a > b; });
  std::map<std::string, int> m;
  for (int i = 0; i < 50; i++) m[name_of(i)] = i;
  std::function<int(int)> f = [&](int x) { return x + (int)m.size(); };
  int acc = 0;
  for (int i = 0; i < 10; i++) acc += f(i);
  std::vector<int> ints(areas.size());
  for (size_t i = 0; i < ints.size(); i++) ints[i] = (int)areas[i];
  printf("%.1f %d %d\n", total(areas), total(ints), acc);
}
