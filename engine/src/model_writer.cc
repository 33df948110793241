#include "model_writer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <future>
#include <system_error>
#include <thread>
#include <vector>

#include "colibri/no_throw.h"
#include "model_blocks.h"
#include "model_format.h"
#include "model_io.h"

namespace colibri::engine::model_detail {
namespace {

namespace fs = std::filesystem;

constexpr char kExpertsFileName[] = "experts.bin";
constexpr char kGatingFileName[] = "gating.bin";
constexpr uint64_t kChunkBytes = 128ull << 20;  // blocks filled, then written, per round
constexpr unsigned kMaxThreads = 8;

Status FsError(const std::string& what, const std::error_code& error) {
  return Status::IoError(what + ": " + error.message());
}

// Removes a temporary directory unless released.
class TempDir {
 public:
  explicit TempDir(fs::path path) : path_(std::move(path)) {}
  ~TempDir() {
    std::error_code ignored;
    if (!released_) fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }
  void Release() { released_ = true; }

 private:
  fs::path path_;
  bool released_ = false;
};

fs::path WithoutTrailingSlash(const std::string& dir) {
  fs::path path = fs::path(dir).lexically_normal();
  return path.has_filename() ? path : path.parent_path();
}

// Runs fill(i) for i in [0, count) on up to kMaxThreads threads; returns the
// error of the lowest failing i, so failures are reported deterministically.
Status ParallelFor(uint64_t count, const std::function<Status(uint64_t)>& fill) {
  std::vector<Status> statuses(count);
  std::atomic<uint64_t> next{0};
  auto work = [&] {
    for (uint64_t i = next++; i < count; i = next++) statuses[i] = NoThrow([&] { return fill(i); });
  };
  const unsigned threads = std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, kMaxThreads);
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads && t < count; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // fewer threads: the others take the work
    }
  }
  work();
  for (std::thread& thread : pool) thread.join();
  for (const Status& status : statuses) COLIBRI_RETURN_IF_ERROR(status);
  return Status::Ok();
}

// Writes one chunk at a time on a background thread: Write() waits for the
// previous chunk, then starts this one. The caller keeps the chunk's bytes
// alive and unchanged until the next Write() or Wait() returns.
class ChunkWriter {
 public:
  explicit ChunkWriter(OutputFile* file) : file_(file) {}
  ~ChunkWriter() { (void)Wait(); }

  Status Write(const std::byte* chunk, uint64_t bytes) {
    COLIBRI_RETURN_IF_ERROR(Wait());
    try {
      pending_ = std::async(std::launch::async, [this, chunk, bytes] { return file_->Write(chunk, bytes); });
      return Status::Ok();
    } catch (const std::system_error&) {
      return file_->Write(chunk, bytes);  // no thread to spare: write in line
    }
  }

  Status Wait() { return pending_.valid() ? pending_.get() : Status::Ok(); }

 private:
  OutputFile* file_;
  std::future<Status> pending_;
};

std::string ExpertName(const ModelConfig& config, uint64_t block) {
  return "layer " + std::to_string(config.layer_ids[block / config.experts]) + " expert " +
         std::to_string(block % config.experts);
}

// Writes experts.bin and fills `digests` with each block's digest (hashed by
// the thread that filled the block).
Result<ModelFile> WriteExperts(const ModelConfig& config, const ExpertFiller& fill, const std::string& path,
                               std::vector<uint64_t>* digests) {
  COLIBRI_ASSIGN_OR_RETURN(OutputFile file, OutputFile::Create(path));
  const std::vector<std::byte> header = EncodeExpertsHeader(config);
  COLIBRI_RETURN_IF_ERROR(file.Write(header.data(), header.size()));
  const uint64_t block_bytes = config.layout.block_bytes;
  const uint64_t blocks = uint64_t{config.layers()} * config.experts;
  const uint64_t per_chunk = std::clamp<uint64_t>(kChunkBytes / block_bytes, 1, blocks);
  digests->assign(blocks, 0);
  // Two chunks: one is filled while the other is written (and hashed).
  std::vector<std::byte> chunks[2] = {std::vector<std::byte>(per_chunk * block_bytes),
                                      std::vector<std::byte>(per_chunk * block_bytes)};
  ChunkWriter writer(&file);  // declared after the chunks: its destructor waits before they are freed
  for (uint64_t first = 0, round = 0; first < blocks; first += per_chunk, ++round) {
    const uint64_t count = std::min(per_chunk, blocks - first);
    std::byte* chunk = chunks[round % 2].data();
    std::memset(chunk, 0, count * block_bytes);
    COLIBRI_RETURN_IF_ERROR(ParallelFor(count, [&](uint64_t i) {
      const uint64_t block = first + i;
      const auto layer_index = static_cast<uint32_t>(block / config.experts);
      const auto expert = static_cast<uint32_t>(block % config.experts);
      std::byte* data = chunk + i * block_bytes;
      COLIBRI_RETURN_IF_ERROR(fill(config, layer_index, expert, data).WithPrefix(ExpertName(config, block)));
      (*digests)[block] = BlockDigest(data, block_bytes);
      return Status::Ok();
    }));
    COLIBRI_RETURN_IF_ERROR(writer.Write(chunk, count * block_bytes));
  }
  COLIBRI_RETURN_IF_ERROR(writer.Wait());
  return file.Close();
}

Result<ModelFile> WriteBlockDigests(const ModelConfig& config, const std::vector<uint64_t>& digests,
                                    const std::string& path) {
  COLIBRI_ASSIGN_OR_RETURN(OutputFile file, OutputFile::Create(path));
  const std::vector<std::byte> bytes = EncodeBlockDigests(config, digests);
  COLIBRI_RETURN_IF_ERROR(file.Write(bytes.data(), bytes.size()));
  return file.Close();
}

Result<ModelFile> WriteGating(const ModelConfig& config, const GatingFiller& fill, const std::string& path) {
  const uint64_t layer_floats = uint64_t{config.experts} * (uint64_t{config.hidden} + 1);
  std::vector<float> gating(layer_floats * config.layers());
  for (uint32_t layer = 0; layer < config.layers(); ++layer) {
    float* weight = gating.data() + layer * layer_floats;
    COLIBRI_RETURN_IF_ERROR(fill(config, layer, weight, weight + uint64_t{config.experts} * config.hidden)
                                .WithPrefix("router of layer " + std::to_string(config.layer_ids[layer])));
  }
  COLIBRI_ASSIGN_OR_RETURN(OutputFile file, OutputFile::Create(path));
  COLIBRI_RETURN_IF_ERROR(file.Write(gating.data(), gating.size() * sizeof(float)));
  return file.Close();
}

Status CompleteConfig(ModelConfig* config) {
  if (config->source_intermediate == 0) config->source_intermediate = config->intermediate;
  COLIBRI_RETURN_IF_ERROR(ValidateShape(*config, "model shape"));
  COLIBRI_RETURN_IF_ERROR(CheckIntermediateRule(*config));
  config->layout = ExpertLayout::Make(config->dtype, config->hidden, config->intermediate, config->block_alignment);
  config->experts_file = ModelFile{kExpertsFileName, 0, ""};
  config->gating_file = ModelFile{kGatingFileName, 0, ""};
  config->block_digests_file = ModelFile{kBlockDigestsFileName, 0, ""};
  return Status::Ok();
}

}  // namespace

Status CheckOutputDir(const std::string& dir) {
  if (dir.empty()) return Status::InvalidArgument("the output directory name is empty");
  std::error_code error;
  const fs::file_status status = fs::status(dir, error);
  if (status.type() == fs::file_type::not_found) return Status::Ok();
  if (error) return FsError(dir, error);
  if (status.type() != fs::file_type::directory) {
    return Status::InvalidArgument(dir + ": exists and is not a directory");
  }
  if (!fs::is_empty(dir, error) || error) {
    return Status::InvalidArgument(dir + ": exists and is not empty; choose a new output directory");
  }
  return Status::Ok();
}

namespace {

// Refuses before writing when the file system cannot hold the model.
Status CheckFreeSpace(const ModelConfig& config, const std::string& dir) {
  const ModelSizes sizes = SizesOf(config);
  const uint64_t blocks = uint64_t{config.layers()} * config.experts;
  const uint64_t needed = sizes.experts_bytes + sizes.gating_bytes + BlockDigestsFileBytes(blocks);
  const fs::path parent = fs::absolute(WithoutTrailingSlash(dir)).parent_path();
  std::error_code error;
  const fs::space_info space = fs::space(parent, error);
  if (error) return Status::Ok();  // the writes will say what is wrong with the directory
  if (needed > space.available) {
    return Status::InvalidArgument(dir + ": the model needs " + std::to_string(needed) + " bytes (experts.bin " +
                                   std::to_string(sizes.experts_bytes) + ", gating.bin " +
                                   std::to_string(sizes.gating_bytes) + "), the file system of " + parent.string() +
                                   " has " + std::to_string(space.available) + " bytes free; nothing was written");
  }
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> WriteModel(ModelConfig config, const ExpertFiller& fill_expert, const GatingFiller& fill_gating,
                               const std::string& dir) {
  COLIBRI_RETURN_IF_ERROR(CompleteConfig(&config));
  COLIBRI_RETURN_IF_ERROR(CheckOutputDir(dir));
  COLIBRI_RETURN_IF_ERROR(CheckFreeSpace(config, dir));
  const fs::path target = WithoutTrailingSlash(dir);
  TempDir temp(target.string() + ".partial-" + std::to_string(::getpid()));
  std::error_code error;
  fs::remove_all(temp.path(), error);  // a stale one of a crashed run with our pid
  if (!fs::create_directories(temp.path(), error)) return FsError("cannot create " + temp.path().string(), error);

  std::vector<uint64_t> digests;
  COLIBRI_ASSIGN_OR_RETURN(config.experts_file,
                           WriteExperts(config, fill_expert, (temp.path() / kExpertsFileName).string(), &digests));
  COLIBRI_ASSIGN_OR_RETURN(config.block_digests_file,
                           WriteBlockDigests(config, digests, (temp.path() / kBlockDigestsFileName).string()));
  COLIBRI_ASSIGN_OR_RETURN(config.gating_file,
                           WriteGating(config, fill_gating, (temp.path() / kGatingFileName).string()));
  COLIBRI_RETURN_IF_ERROR(WriteTextFile((temp.path() / kConfigFileName).string(), ConfigToJson(config).dump(2) + "\n"));
  fs::rename(temp.path(), target, error);
  if (error) return FsError("cannot rename " + temp.path().string() + " to " + target.string(), error);
  temp.Release();
  return config;
}

}  // namespace colibri::engine::model_detail
