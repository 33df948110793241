#include "colibri/bench/provenance.h"

#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>

namespace colibri::bench {

std::string ShellQuote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string CommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string line;
  std::string word;
  std::istringstream words(raw);
  while (std::getline(words, word, '\0')) {
    if (!line.empty()) line += ' ';
    const bool plain = !word.empty() && word.find_first_of(" \t'\"\\$") == std::string::npos;
    line += plain ? word : ShellQuote(word);
  }
  return line.empty() ? "colibri" : line;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace colibri::bench
