#include "live.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "audio_stream.h"
#include "formats.h"
#include "streaming.h"
#include "utf8.h"

namespace parakeet {
namespace {

// Python's round(x, 3): the decimal nearest the exact binary value (ties to even), read back as a double.
double round3(double v) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return std::strtod(buf, nullptr);
}

// str.lstrip() / str.strip(): whitespace as Python's str.isspace() sees it. Only the whitespace is re-encoded
// (to count its bytes); the rest of the text is kept byte for byte.
std::string strip(const std::string& s, bool right) {
  const auto cps = utf8::decode(s);
  size_t b = 0, e = cps.size();
  while (b < e && utf8::is_space(cps[b])) ++b;
  while (right && e > b && utf8::is_space(cps[e - 1])) --e;
  const size_t head = utf8::encode(std::vector<char32_t>(cps.begin(), cps.begin() + b)).size();
  const size_t tail = utf8::encode(std::vector<char32_t>(cps.begin() + e, cps.end())).size();
  return s.substr(head, s.size() - head - tail);
}

class Printer {
 public:
  Printer(const LiveOptions& o)
      : jsonl_(o.format == "jsonl"), partial_(o.partial), tokens_(o.timestamps == "token" || o.timestamps == "all") {}

  void show(const StreamResult& r, bool last = false) {
    if (jsonl_) {
      if (!r.tokens.empty() || r.final_until > start_ || last) {
        // json.dumps(obj, ensure_ascii=False) with live.py's keys in live.py's order.
        std::string line = "{\"start\": " + python_float(round3(start_)) +
                           ", \"end\": " + python_float(round3(r.final_until)) + ", \"text\": " + json_string(r.text) +
                           ", \"final\": true";
        if (tokens_) {
          line += ", \"tokens\": [";
          for (size_t i = 0; i < r.tokens.size(); ++i) {
            const Span& s = r.tokens[i];
            line += (i ? ", {\"id\": " : "{\"id\": ") + std::to_string(s.id.value_or(0)) +
                    ", \"text\": " + json_string(s.text) + ", \"start\": " + python_float(s.start) +
                    ", \"end\": " + python_float(s.end) + "}";
          }
          line += "]";
        }
        if (partial_) line += ", \"draft\": " + json_string(r.draft_text);
        line += "}\n";
        std::fwrite(line.data(), 1, line.size(), stdout);
        std::fflush(stdout);
        start_ = r.final_until;
      }
      return;
    }
    const std::string text = printed_any_ ? r.text : strip(r.text, /*right=*/false);
    if (!text.empty()) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      printed_any_ = true;
    }
    if (last) std::fputc('\n', stdout);
    std::fflush(stdout);
    if (partial_ && isatty(STDERR_FILENO)) {
      const std::string draft = last ? "" : "[draft] " + strip(r.draft_text, /*right=*/true);
      std::fprintf(stderr, "\r\x1b[K%s", draft.c_str());
      std::fflush(stderr);
    }
  }

 private:
  bool jsonl_, partial_, tokens_;
  double start_ = 0.0;
  bool printed_any_ = false;
};

extern "C" void on_sigint(int) { PcmBlockReader::interrupt(); }

// Ctrl-C ends the input instead of the process, so that what was heard is still decoded and printed (the Python
// runner catches KeyboardInterrupt the same way); a second Ctrl-C kills as usual.
class SigintAsEndOfInput {
 public:
  SigintAsEndOfInput() {
    struct sigaction sa{};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;  // no SA_RESTART: a blocked read() returns EINTR
    installed_ = sigaction(SIGINT, &sa, &old_) == 0;
  }
  ~SigintAsEndOfInput() {
    if (installed_) sigaction(SIGINT, &old_, nullptr);
  }

 private:
  struct sigaction old_{};
  bool installed_ = false;
};

}  // namespace

int run_live(Transcriber& transcriber, const LiveOptions& options, int fd) {
  const ContextSize context = context_frames(transcriber, options.context);
  StreamingTranscriber stream(transcriber, context, options.partial);
  PcmBlockReader blocks(fd, options.stream_rate, options.stream_channels, transcriber.metadata().sample_rate);
  Printer printer(options);
  SigintAsEndOfInput sigint;
  std::vector<float> block;
  while (blocks.next(block)) printer.show(stream.feed(block));
  printer.show(stream.finish(), /*last=*/true);
  return 0;
}

}  // namespace parakeet
