// Watches the sockets of requests that wait for their answer (suspended libmicrohttpd
// connections, whose sockets libmicrohttpd does not poll) for the client's hang-up, so that a
// request whose client has gone is cancelled instead of computed for nobody. A client that shuts
// down its sending side while it waits counts as gone, as it does for gRPC's RST_STREAM.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace dflash::http {

class HangupWatch {
 public:
  // Starts the watching thread (one epoll set). INTERNAL when the kernel refuses the epoll set or
  // its wake-up eventfd.
  static absl::StatusOr<std::unique_ptr<HangupWatch>> Start();
  ~HangupWatch();  // Stops and joins the thread; watched flags are left as they are.
  HangupWatch(const HangupWatch&) = delete;
  HangupWatch& operator=(const HangupWatch&) = delete;

  // Sets *gone (once) when the peer of connected socket `fd` hangs up or the socket fails, until
  // Forget(id). The caller keeps `fd` open until it has called Forget. Returns the id; 0 when the
  // socket cannot be watched (then `gone` is never set by this watch).
  uint64_t Watch(int fd, std::shared_ptr<std::atomic<bool>> gone);
  // Stops watching `id` (0 or an id already fired or forgotten: nothing). Call before the socket
  // is closed or handed back to its owner's poll loop.
  void Forget(uint64_t id);

 private:
  HangupWatch(int epoll_fd, int wake_fd);
  void Run();

  const int epoll_fd_;
  const int wake_fd_;  // An eventfd in the epoll set: written once to stop the thread.
  std::mutex mutex_;
  struct Entry {
    int fd;
    std::shared_ptr<std::atomic<bool>> gone;
  };
  absl::flat_hash_map<uint64_t, Entry> entries_;  // Guarded by mutex_.
  uint64_t next_id_ = 1;                          // Guarded by mutex_.
  std::thread thread_;
};

}  // namespace dflash::http
