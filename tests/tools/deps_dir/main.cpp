// Uses each packed dependency once, the way the trainer does, and prints one line per library;
// check_deps_dir.sh compares the lines.
#define PCRE2_CODE_UNIT_WIDTH 8
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#include <pcre2.h>
#include <stb_image.h>
#include <utf8proc.h>

#include <toml++/toml.h>
#include <CLI/CLI.hpp>
#include <Eigen/Dense>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

int main(int argc, char** argv) {
  CLI::App app{"deps_dir_consumer"};
  std::string word = "shard";
  app.add_option("--word", word);
  CLI11_PARSE(app, argc, argv);

  const auto table = toml::parse("[model]\narch = \"qwen2\"\n");
  std::printf("toml %s\n", table["model"]["arch"].value_or(std::string("?")).c_str());

  const auto json = nlohmann::json::parse(R"({"ev":"step","loss":1.5})");
  std::printf("json %s %.1f\n", json["ev"].get<std::string>().c_str(), json["loss"].get<double>());

  int errcode = 0;
  PCRE2_SIZE erroffset = 0;
  const auto* pattern = reinterpret_cast<PCRE2_SPTR>("'s|'t|\\p{L}+");
  pcre2_code* re = pcre2_compile(pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &errcode,
                                 &erroffset, nullptr);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
  const int rc =
      pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(word.c_str()), word.size(), 0, 0, md, nullptr);
  std::printf("pcre2 %d %zu\n", rc, pcre2_get_ovector_pointer(md)[1]);
  pcre2_match_data_free(md);
  pcre2_code_free(re);

  auto* folded = utf8proc_NFKC_Casefold(reinterpret_cast<const utf8proc_uint8_t*>("ÅBC"));
  std::printf("utf8proc %s\n", reinterpret_cast<char*>(folded));
  std::free(folded);

  int w = 0, h = 0, n = 0;
  const unsigned char not_an_image[4] = {0, 1, 2, 3};
  unsigned char* pixels = stbi_load_from_memory(not_an_image, 4, &w, &h, &n, 0);
  std::printf("stb %s\n", pixels ? "decoded" : "rejected");
  stbi_image_free(pixels);

  // Eigen: the search library's Cholesky (search/gp.cpp).
  Eigen::Matrix2d a;
  a << 4.0, 2.0, 2.0, 3.0;
  const Eigen::LLT<Eigen::Matrix2d> llt(a);
  std::printf("eigen %.1f %.1f\n", llt.matrixL()(0, 0), llt.matrixL()(1, 0));
  return 0;
}
