#include "server/http/hangup_watch.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dflash::http {
namespace {

// The wake-up eventfd's epoll data (watch ids start at 1).
constexpr uint64_t kWakeId = 0;

}  // namespace

absl::StatusOr<std::unique_ptr<HangupWatch>> HangupWatch::Start() {
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) {
    return absl::InternalError(absl::StrCat("epoll_create1: ", std::strerror(errno)));
  }
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    const int error = errno;
    close(epoll_fd);
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(error)));
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kWakeId;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &event) != 0) {
    const int error = errno;
    close(wake_fd);
    close(epoll_fd);
    return absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(error)));
  }
  std::unique_ptr<HangupWatch> watch(new HangupWatch(epoll_fd, wake_fd));
  watch->thread_ = std::thread([raw = watch.get()] { raw->Run(); });
  return watch;
}

HangupWatch::HangupWatch(int epoll_fd, int wake_fd) : epoll_fd_(epoll_fd), wake_fd_(wake_fd) {}

HangupWatch::~HangupWatch() {
  const uint64_t one = 1;
  // The thread stops at the first wake-up; a failed write (never, for a fresh eventfd) would hang
  // the join, so it is retried on EINTR only.
  while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
  thread_.join();
  close(wake_fd_);
  close(epoll_fd_);
}

uint64_t HangupWatch::Watch(int fd, std::shared_ptr<std::atomic<bool>> gone) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_id_++;
  epoll_event event{};
  // Not EPOLLIN: a pipelined next request leaves data readable, which is no hang-up.
  event.events = EPOLLRDHUP | EPOLLONESHOT;
  event.data.u64 = id;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) return 0;
  entries_.emplace(id, Entry{fd, std::move(gone)});
  return id;
}

void HangupWatch::Forget(uint64_t id) {
  if (id == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto entry = entries_.find(id);
  if (entry == entries_.end()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, entry->second.fd, nullptr);
  entries_.erase(entry);
}

void HangupWatch::Run() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  while (true) {
    const int ready = epoll_wait(epoll_fd_, events, kMaxEvents, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return;  // The epoll set is gone: nothing left to watch.
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (int i = 0; i < ready; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kWakeId) return;
      auto entry = entries_.find(id);
      if (entry == entries_.end()) continue;  // Forgotten after the event was queued.
      // EPOLLRDHUP, EPOLLHUP or EPOLLERR: the client cannot be waiting for the answer any more.
      entry->second.gone->store(true, std::memory_order_release);
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, entry->second.fd, nullptr);
      entries_.erase(entry);
    }
  }
}

}  // namespace dflash::http
