// Reference for stallfs's prefetch DALI order: applies std::shuffle with
// std::mt19937(seed) for each seed given, one after the other, to the list
// 0..n-1 (as DALI's FileLabelLoader does), printing the list after each.
//
//   g++ -O2 -std=c++17 -o dali_shuffle dali_shuffle.cc
//   ./dali_shuffle N SEED [SEED...]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s N SEED [SEED...]\n", argv[0]);
    return 2;
  }
  long n = std::atol(argv[1]);
  std::vector<long> v(n);
  for (long i = 0; i < n; i++) v[i] = i;
  for (int a = 2; a < argc; a++) {
    std::mt19937 g(static_cast<unsigned>(std::strtoul(argv[a], nullptr, 10)));
    std::shuffle(v.begin(), v.end(), g);
    for (long i = 0; i < n; i++) std::printf(i ? " %ld" : "%ld", v[i]);
    std::printf("\n");
  }
  return 0;
}
