// Loads libdflash_sentencepiece_shim.so into a new link namespace (sentencepiece_shim_api.h) and
// forwards to it.
#include "server/tokenizer/sentencepiece_model.h"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <utility>

#include "server/tokenizer/sentencepiece_shim_api.h"

namespace dflash {

struct SentencePieceModel::Shim {
  decltype(&dflash_spm_load) load = nullptr;
  decltype(&dflash_spm_free) free = nullptr;
  decltype(&dflash_spm_piece_count) piece_count = nullptr;
  decltype(&dflash_spm_unk_id) unk_id = nullptr;
  decltype(&dflash_spm_piece_to_id) piece_to_id = nullptr;
  decltype(&dflash_spm_id_to_piece) id_to_piece = nullptr;
  decltype(&dflash_spm_encode) encode = nullptr;
  decltype(&dflash_spm_decode) decode = nullptr;
  std::string error;  // Why the shim could not be loaded; empty when it was.
};

namespace {

constexpr char kShimFileName[] = "libdflash_sentencepiece_shim.so";

std::vector<std::filesystem::path> ShimCandidates() {
  std::vector<std::filesystem::path> candidates;
  if (const char* explicit_path = std::getenv("DFLASH_SENTENCEPIECE_SHIM")) {
    candidates.emplace_back(explicit_path);
  }
  std::error_code error;
  const std::filesystem::path executable = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) candidates.push_back(executable.parent_path().parent_path() / "lib" / kShimFileName);
#ifdef DFLASH_SENTENCEPIECE_SHIM_PATH
  candidates.emplace_back(DFLASH_SENTENCEPIECE_SHIM_PATH);
#endif
  return candidates;
}

template <typename Function>
bool Resolve(void* library, const char* name, Function* function, std::string* error) {
  *function = reinterpret_cast<Function>(dlsym(library, name));
  if (*function == nullptr) *error = std::string("missing symbol ") + name;
  return *function != nullptr;
}

}  // namespace

std::unique_ptr<SentencePieceModel> SentencePieceModel::Load(const std::filesystem::path& path,
                                                             SentencePieceError* error) {
  std::error_code filesystem_error;
  if (!std::filesystem::is_regular_file(path, filesystem_error)) {
    error->kind = SentencePieceError::Kind::kNotFound;
    error->message = path.string() +
                     ": no such file (the sentencepiece model that DeBERTa-v2/v3 checkpoints ship "
                     "as spm.model)";
    return nullptr;
  }
  const Shim& shim = LoadShim();
  if (!shim.error.empty()) {
    error->kind = SentencePieceError::Kind::kInvalidModel;
    error->message = path.string() + ": cannot load the sentencepiece library: " + shim.error;
    return nullptr;
  }
  std::array<char, 512> message{};
  int kind = DFLASH_SPM_OK;
  void* handle = shim.load(path.c_str(), &kind, message.data(), message.size());
  if (handle == nullptr) {
    error->kind = SentencePieceError::Kind::kInvalidModel;
    error->message = path.string() + ": not a valid sentencepiece model: " + message.data();
    return nullptr;
  }
  std::unique_ptr<SentencePieceModel> model(new SentencePieceModel(&shim, handle));
  if (model->piece_count() <= 0) {
    error->kind = SentencePieceError::Kind::kInvalidModel;
    error->message = path.string() + ": the sentencepiece model has no pieces";
    return nullptr;
  }
  return model;
}

const SentencePieceModel::Shim& SentencePieceModel::LoadShim() {
  static const Shim* const shim = [] {
    auto* loaded = new Shim();
    void* library = nullptr;
    std::string tried;
    for (const std::filesystem::path& candidate : ShimCandidates()) {
      std::error_code error;
      if (!std::filesystem::exists(candidate, error)) {
        tried += (tried.empty() ? "" : ", ") + candidate.string();
        continue;
      }
      library = dlmopen(LM_ID_NEWLM, candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (library == nullptr) {
        const char* reason = dlerror();
        loaded->error = candidate.string() + ": " + (reason != nullptr ? reason : "dlmopen failed");
        return loaded;
      }
      break;
    }
    if (library == nullptr) {
      loaded->error = std::string(kShimFileName) + " not found (looked at " + tried +
                      "; set DFLASH_SENTENCEPIECE_SHIM to its path)";
      return loaded;
    }
    std::string& error = loaded->error;
    (void)(Resolve(library, "dflash_spm_load", &loaded->load, &error) &&
           Resolve(library, "dflash_spm_free", &loaded->free, &error) &&
           Resolve(library, "dflash_spm_piece_count", &loaded->piece_count, &error) &&
           Resolve(library, "dflash_spm_unk_id", &loaded->unk_id, &error) &&
           Resolve(library, "dflash_spm_piece_to_id", &loaded->piece_to_id, &error) &&
           Resolve(library, "dflash_spm_id_to_piece", &loaded->id_to_piece, &error) &&
           Resolve(library, "dflash_spm_encode", &loaded->encode, &error) &&
           Resolve(library, "dflash_spm_decode", &loaded->decode, &error));
    return loaded;
  }();
  return *shim;
}

SentencePieceModel::~SentencePieceModel() { shim_->free(handle_); }

int SentencePieceModel::piece_count() const { return shim_->piece_count(handle_); }

int32_t SentencePieceModel::PieceToId(std::string_view piece) const {
  return shim_->piece_to_id(handle_, piece.data(), piece.size());
}

std::string_view SentencePieceModel::IdToPiece(int32_t id) const {
  size_t size = 0;
  const char* data = shim_->id_to_piece(handle_, id, &size);
  return std::string_view(data, size);
}

int32_t SentencePieceModel::unk_id() const { return shim_->unk_id(handle_); }

bool SentencePieceModel::Encode(std::string_view text, std::vector<SentencePieceToken>* tokens,
                                SentencePieceError* error) const {
  std::array<char, 512> message{};
  std::vector<DflashSpmToken> buffer(text.size() + 8);  // Pieces rarely outnumber bytes.
  int64_t count = 0;
  for (;;) {
    count = shim_->encode(handle_, text.data(), text.size(), buffer.data(), buffer.size(),
                          message.data(), message.size());
    if (count < 0) {
      error->kind = SentencePieceError::Kind::kEncodeFailed;
      error->message = message.data();
      return false;
    }
    if (static_cast<size_t>(count) <= buffer.size()) break;
    buffer.resize(static_cast<size_t>(count));
  }
  tokens->clear();
  tokens->reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const DflashSpmToken& token = buffer[static_cast<size_t>(i)];
    tokens->push_back({token.id, token.byte_begin, token.byte_end});
  }
  return true;
}

bool SentencePieceModel::Decode(const std::vector<int32_t>& ids, std::string* text,
                                SentencePieceError* error) const {
  std::array<char, 512> message{};
  std::string buffer(ids.size() * 8 + 16, '\0');  // Pieces are rarely longer than 8 bytes.
  for (;;) {
    const int64_t size = shim_->decode(handle_, ids.data(), ids.size(), buffer.data(),
                                       buffer.size(), message.data(), message.size());
    if (size < 0) {
      error->kind = SentencePieceError::Kind::kDecodeFailed;
      error->message = message.data();
      return false;
    }
    if (static_cast<size_t>(size) <= buffer.size()) {
      buffer.resize(static_cast<size_t>(size));
      break;
    }
    buffer.resize(static_cast<size_t>(size));
  }
  *text = std::move(buffer);
  return true;
}

}  // namespace dflash
