#include "server/batching/host_work_pool.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

namespace dflash::serving {

HostWorkPool::HostWorkPool(int threads) {
  threads = std::max(threads, 1);
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

HostWorkPool::~HostWorkPool() { Stop(); }

void HostWorkPool::Post(Urgency urgency, absl::AnyInvocable<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    (urgency == Urgency::kUrgent ? urgent_ : normal_).push_back(std::move(task));
  }
  wake_.notify_one();
}

void HostWorkPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void HostWorkPool::Loop() {
  // Named so that per-thread CPU time (top -H, /proc/<pid>/task) shows the host work.
  pthread_setname_np(pthread_self(), "dflash-host");
  for (;;) {
    absl::AnyInvocable<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !urgent_.empty() || !normal_.empty(); });
      std::deque<absl::AnyInvocable<void()>>& fifo = urgent_.empty() ? normal_ : urgent_;
      if (fifo.empty()) return;  // Stopping and nothing left to run.
      task = std::move(fifo.front());
      fifo.pop_front();
    }
    task();
  }
}

}  // namespace dflash::serving
