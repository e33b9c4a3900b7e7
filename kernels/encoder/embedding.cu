#include "kernels/encoder/embedding.h"
#include "kernels/encoder/encoder_common.cuh"
#include "kernels/encoder/row_norm.cuh"

namespace dflash::kernels {
namespace {

using encoder_detail::Aligned16;
using encoder_detail::kVec16;
using encoder_detail::LoadVec;

// Row t of word[id] + position[pos] + token_type[type].
template <typename T>
struct EmbeddingLoader {
  const int32_t* token_ids;
  const int32_t* token_type_ids;
  const int32_t* position_ids;
  const T* word;
  const T* position;
  const T* token_type;
  int64_t width;

  struct Row {
    const T* word;
    const T* position;
    const T* token_type;
  };
  __device__ Row Begin(int64_t t) const {
    Row row;
    row.word = word + int64_t{token_ids[t]} * width;
    row.position = position_ids != nullptr ? position + int64_t{position_ids[t]} * width : nullptr;
    row.token_type = nullptr;
    if (token_type != nullptr) {
      const int64_t type = token_type_ids != nullptr ? int64_t{token_type_ids[t]} : 0;
      row.token_type = token_type + type * width;
    }
    return row;
  }
  template <int VEC>
  __device__ void Load(const Row& row, int col, float (&v)[VEC]) const {
    LoadVec<T, VEC>(row.word + col, v);
    if (row.position != nullptr) {
      float p[VEC];
      LoadVec<T, VEC>(row.position + col, p);
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[e] += p[e];
    }
    if (row.token_type != nullptr) {
      float p[VEC];
      LoadVec<T, VEC>(row.token_type + col, p);
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[e] += p[e];
    }
  }
};

template <typename T, int VEC>
cudaError_t Launch(const EmbeddingProblem& p, const EmbeddingLoader<T>& loader,
                   cudaStream_t stream) {
  T* out = static_cast<T*>(p.out);
  if (p.gamma != nullptr) {
    return encoder_detail::LaunchRowNormVec<T, VEC, true>(loader, p.gamma, p.beta, p.eps, p.tokens,
                                                          p.width, out, p.width, stream);
  }
  return encoder_detail::LaunchRowNormVec<T, VEC, false>(loader, nullptr, nullptr, p.eps, p.tokens,
                                                         p.width, out, p.width, stream);
}

}  // namespace

cudaError_t EmbeddingForward(const EmbeddingProblem& p, cudaStream_t stream) {
  if (!encoder_detail::ValidDataType(p.dtype) || p.width < 1 || p.tokens < 0 || !(p.eps >= 0.0f) ||
      (p.gamma == nullptr) != (p.beta == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (p.tokens == 0) return cudaSuccess;
  if (p.token_ids == nullptr || p.word == nullptr || p.out == nullptr ||
      (p.position_ids != nullptr && p.position == nullptr)) {
    return cudaErrorInvalidValue;
  }
  return encoder_detail::DispatchType(p.dtype, [&](auto tag) -> cudaError_t {
    using T = decltype(tag);
    constexpr int kVec = kVec16<T>;
    const EmbeddingLoader<T> loader{p.token_ids,
                                    p.token_type_ids,
                                    p.position_ids,
                                    static_cast<const T*>(p.word),
                                    static_cast<const T*>(p.position),
                                    static_cast<const T*>(p.token_type),
                                    p.width};
    const bool vectorized = p.width % kVec == 0 && Aligned16(p.word) && Aligned16(p.out) &&
                            (p.position_ids == nullptr || Aligned16(p.position)) &&
                            (p.token_type == nullptr || Aligned16(p.token_type)) &&
                            (p.gamma == nullptr || (Aligned16(p.gamma) && Aligned16(p.beta)));
    if (vectorized) return Launch<T, kVec>(p, loader, stream);
    return Launch<T, 1>(p, loader, stream);
  });
}

}  // namespace dflash::kernels
