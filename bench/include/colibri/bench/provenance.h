// Where a measurement came from, in the words the profiles and the reference
// commands use: this process's command line, the UTC time, and the shell
// quoting of one word (fio's command line, the command a profile cites).
// Ownership: values only. Thread-safety: plain functions. Errors: none.
#pragma once

#include <string>

namespace colibri::bench {

// `word` in single quotes for a POSIX shell, each ' written as '\''.
std::string ShellQuote(const std::string& word);

// This process's command line (/proc/self/cmdline), words joined by spaces,
// a word that is empty or has a space, tab, quote, backslash or '$'
// ShellQuote'd; "colibri" when unreadable.
std::string CommandLine();

// The current UTC time, "YYYY-MM-DDTHH:MM:SSZ".
std::string UtcNow();

}  // namespace colibri::bench
