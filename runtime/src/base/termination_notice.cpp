// The line a stopped rank prints (termination_notice.hpp).
#include "dpscope/base/termination_notice.hpp"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <string>

#include "dpscope/base/terminal_text.hpp"

namespace dpscope {

namespace {

constexpr size_t kLineBytes = 1024;
constexpr std::string_view kErrorPrefix = "dpscope: error: ";

// Two prepared lines; the handler writes the one `g_line` names (0: none). A line is filled while
// it is not the one named, then named: the handler never reads a line being written.
char g_lines[2][kLineBytes];
size_t g_lengths[2] = {0, 0};
volatile sig_atomic_t g_line = 0;  // 0: nothing to print, 1: the stopped line, 2: the own error
volatile sig_atomic_t g_held = 0;  // 1: the process prints its error and exits: let it

extern "C" void write_notice_and_end(int sig) {
  if (g_held != 0) return;
  const int which = g_line;
  if (which != 0) {
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, g_lines[which - 1], g_lengths[which - 1]);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void fill(int which, std::string_view head, std::string_view text) {
  char* line = g_lines[which - 1];
  size_t n = std::min(head.size(), kLineBytes - 1);
  std::memcpy(line, head.data(), n);
  // One line: a message may span lines (a run's error) or quote escape sequences (a trace's name);
  // control characters are written out (base/terminal_text.hpp). The last character is the newline.
  std::string printable(text);
  std::replace(printable.begin(), printable.end(), '\n', ' ');
  printable = printable_line(printable);
  const size_t body = std::min(printable.size(), kLineBytes - 1 - n);
  std::memcpy(line + n, printable.data(), body);
  n += body;
  if (n == 0 || line[n - 1] != '\n') line[n++] = '\n';
  g_lengths[which - 1] = n;
}

}  // namespace

void arm_termination_notice(std::string_view line) {
  g_line = 0;
  fill(1, "", line.substr(0, line.size() - (line.ends_with('\n') ? 1 : 0)));
  struct sigaction action {};
  action.sa_handler = write_notice_and_end;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  g_line = 1;
}

void own_error_on_termination(std::string_view message) {
  if (g_line != 1) return;  // not a rank of a job; or the first error, the root cause, is kept
  fill(2, kErrorPrefix, message);
  g_line = 2;
}

void hold_termination() { g_held = 1; }

}  // namespace dpscope
