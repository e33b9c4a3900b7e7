#include "server/service/worker_pool.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <utility>

namespace dflash::serving {

WorkerPool::WorkerPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void WorkerPool::Post(absl::AnyInvocable<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void WorkerPool::Loop() {
  for (;;) {
    absl::AnyInvocable<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // Stopping and nothing left to run.
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

namespace {

struct ParallelForState {
  std::function<absl::Status(int)> body;
  absl::AnyInvocable<void(absl::Status)> then;
  std::atomic<int> chunks_left{0};
  std::mutex mutex;
  int error_index ABSL_GUARDED_BY(mutex) = std::numeric_limits<int>::max();
  absl::Status error ABSL_GUARDED_BY(mutex);

  void RunChunk(int begin, int end) {
    for (int i = begin; i < end; ++i) {
      absl::Status status = body(i);
      if (!status.ok()) {
        std::lock_guard<std::mutex> lock(mutex);
        if (i < error_index) {
          error_index = i;
          error = std::move(status);
        }
        break;  // Later indices of this chunk cannot produce a lower-index error.
      }
    }
    if (chunks_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      absl::Status result;
      {
        std::lock_guard<std::mutex> lock(mutex);
        result = error;
      }
      then(std::move(result));
    }
  }
};

}  // namespace

void ParallelFor(WorkerPool& pool, int count, int min_chunk,
                 std::function<absl::Status(int index)> body,
                 absl::AnyInvocable<void(absl::Status)> then) {
  if (count <= 0) {
    then(absl::OkStatus());
    return;
  }
  const int chunk = std::max({1, min_chunk, (count + pool.size() - 1) / pool.size()});
  const int chunks = (count + chunk - 1) / chunk;
  auto state = std::make_shared<ParallelForState>();
  state->body = std::move(body);
  state->then = std::move(then);
  state->chunks_left.store(chunks, std::memory_order_relaxed);
  // The caller's thread runs the first chunk itself: a small request is tokenized without any
  // hand-off, and a large one keeps this thread busy instead of idle.
  for (int c = 1; c < chunks; ++c) {
    const int begin = c * chunk;
    const int end = std::min(count, begin + chunk);
    pool.Post([state, begin, end] { state->RunChunk(begin, end); });
  }
  state->RunChunk(0, std::min(count, chunk));
}

}  // namespace dflash::serving
