// The HTTP APIs the server speaks. Each has its own error body shape (http_errors.h).
#pragma once

namespace dflash::http {

enum class ApiFamily {
  kTei,     // Hugging Face Text Embeddings Inference routes (and this server's extensions).
  kOpenAi,  // OpenAI's /v1/embeddings and /v1/models.
  kCohere,  // Cohere's and Jina's /v1/rerank (and Cohere's /v2/rerank).
};

}  // namespace dflash::http
