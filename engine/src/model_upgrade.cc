// UpgradeModel: a format 1 model directory gains its block digests
// (experts.xxh3) and becomes format 2, in place. experts.bin and gating.bin
// are not rewritten: they are verified against config.json first (so the
// digests describe the bytes that were written, not bytes changed since),
// then experts.xxh3 and config.json are each written whole through a
// temporary file and a rename, config.json last. A crash in between leaves a
// format 1 model beside a stray experts.xxh3, which format 1 ignores and the
// next upgrade replaces.
#include "colibri/engine/model.h"
#include "colibri/engine/output_claim.h"
#include "model_blocks.h"
#include "model_format.h"

namespace colibri::engine {

Result<ModelConfig> UpgradeModel(const std::string& dir) {
  COLIBRI_ASSIGN_OR_RETURN(Model model, OpenModel(dir, ModelVerify::kNone));  // structure
  ModelConfig config = model.config();
  if (config.block_digests_file) {
    return Status::InvalidArgument(dir + ": already format " + std::to_string(kModelFormatVersion) +
                                   " (it has block digests): nothing to upgrade");
  }
  COLIBRI_ASSIGN_OR_RETURN(const std::string gating_sha256,
                           model_detail::Sha256OfFile(model_detail::JoinPath(dir, config.gating_file.name)));
  COLIBRI_RETURN_IF_ERROR(model_detail::CheckSha256(config.gating_file, gating_sha256).WithPrefix(dir));
  COLIBRI_ASSIGN_OR_RETURN(model_detail::ExpertsHashes hashes,
                           model_detail::HashExperts(model.experts_path(), config,
                                                     model_detail::SizesOf(config).experts_data_offset, true));
  COLIBRI_RETURN_IF_ERROR(model_detail::CheckSha256(config.experts_file, hashes.sha256).WithPrefix(dir));

  const std::vector<std::byte> digests = model_detail::EncodeBlockDigests(config, hashes.block_digests);
  COLIBRI_ASSIGN_OR_RETURN(const std::string digests_sha256, model_detail::Sha256OfBytes(digests.data(), digests.size()));
  config.block_digests_file = ModelFile{model_detail::kBlockDigestsFileName, digests.size(), digests_sha256};
  if (config.block_digests_file->name == config.experts_file.name ||
      config.block_digests_file->name == config.gating_file.name) {
    return Status::InvalidArgument(dir + ": a data file is named " + config.block_digests_file->name +
                                   ", the name of the block digest file");
  }
  COLIBRI_RETURN_IF_ERROR(
      WriteFileWhole(model_detail::JoinPath(dir, config.block_digests_file->name),
                     std::string(reinterpret_cast<const char*>(digests.data()), digests.size())));
  COLIBRI_RETURN_IF_ERROR(WriteFileWhole(model_detail::JoinPath(dir, model_detail::kConfigFileName),
                                         model_detail::ConfigToJson(config).dump(2) + "\n"));
  return config;
}

}  // namespace colibri::engine
