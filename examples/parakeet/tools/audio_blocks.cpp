// parakeet_audio_blocks FILE RATE                     - FileBlockReader's blocks of FILE at RATE Hz
// parakeet_audio_blocks - STREAM_RATE CHANNELS RATE   - PcmBlockReader's blocks of raw PCM on stdin
// Writes the samples as raw float32 to stdout and each block's length on its own line to stderr; errors as one
// "error: ..." line and exit 2. Only for tests: it shows exactly what the runner feeds the decoder.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "../runner/audio_stream.h"

int main(int argc, char** argv) {
  try {
    std::vector<float> block;
    auto emit = [&]() {
      std::fwrite(block.data(), sizeof(float), block.size(), stdout);
      std::fprintf(stderr, "%zu\n", block.size());
    };
    if (argc == 3) {
      parakeet::FileBlockReader reader(argv[1], std::stol(argv[2]));
      while (reader.next(block)) emit();
    } else if (argc == 5 && std::string(argv[1]) == "-") {
      parakeet::PcmBlockReader reader(0, std::stol(argv[2]), std::stoi(argv[3]), std::stol(argv[4]));
      while (reader.next(block)) emit();
    } else {
      std::fprintf(stderr, "usage: parakeet_audio_blocks FILE RATE | - STREAM_RATE CHANNELS RATE\n");
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
