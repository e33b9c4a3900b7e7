#include "server/batching/request_queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dflash::serving {
namespace {

int SequenceTokens(const PendingRequest& request, int sequence) {
  return static_cast<int>(request.request.sequences[sequence].ids.size());
}

bool IsCancelled(const InferenceRequest& request) {
  return request.cancelled != nullptr && request.cancelled->load(std::memory_order_acquire);
}

// DEADLINE_EXCEEDED when, by the estimate of `seconds_per_token` (0: none), a batch of
// `batch_tokens` tokens started at `start` ends after the request's deadline: computing it would
// only produce an answer its caller no longer waits for, in the time of requests that can still be
// served.
absl::Status LateStatus(const PendingRequest& pending, absl::Time now, absl::Time start,
                        int batch_tokens, double seconds_per_token) {
  const absl::Time deadline = pending.request.deadline;
  if (seconds_per_token <= 0 || deadline == absl::InfiniteFuture()) return absl::OkStatus();
  const absl::Duration batch_time = absl::Seconds(seconds_per_token * batch_tokens);
  if (start + batch_time <= deadline) return absl::OkStatus();
  const auto millis = [](absl::Duration duration) {
    return absl::FormatDuration(absl::Trunc(duration, absl::Milliseconds(1)));
  };
  return absl::DeadlineExceededError(absl::StrCat(
      "the request cannot be answered before its deadline (", millis(deadline - now),
      " left, its batch of ", batch_tokens, " tokens takes about ", millis(batch_time),
      start > now ? absl::StrCat(" after the ", millis(start - now), " its engine is still busy")
                  : "",
      ")"));
}

}  // namespace

// The deadline is checked first: when it passes, gRPC also cancels the call on the server (which
// sets the cancellation flag), and the request must still count as DEADLINE_EXCEEDED.
absl::Status DropStatus(const PendingRequest& pending, absl::Time now) {
  const InferenceRequest& request = pending.request;
  if (request.deadline <= now) {
    return absl::DeadlineExceededError("deadline passed while the request was queued");
  }
  if (IsCancelled(request)) {
    return absl::CancelledError("request cancelled while queued");
  }
  return absl::OkStatus();
}

RequestQueue::RequestQueue(int max_batch_tokens, int max_batch_sequences)
    : max_batch_tokens_(max_batch_tokens), max_batch_sequences_(max_batch_sequences) {}

void RequestQueue::Push(std::shared_ptr<PendingRequest> request) {
  const int level = static_cast<int>(request->request.priority);
  ++requests_;
  sequences_ += request->num_sequences() - request->next_sequence;
  for (int s = request->next_sequence; s < request->num_sequences(); ++s) {
    tokens_ += SequenceTokens(*request, s);
    level_tokens_[level] += SequenceTokens(*request, s);
  }
  levels_[level].push_back(std::move(request));
}

void RequestQueue::SubtractUntaken(const PendingRequest& request) {
  const int level = static_cast<int>(request.request.priority);
  --requests_;
  sequences_ -= request.num_sequences() - request.next_sequence;
  for (int s = request.next_sequence; s < request.num_sequences(); ++s) {
    tokens_ -= SequenceTokens(request, s);
    level_tokens_[level] -= SequenceTokens(request, s);
  }
}

void RequestQueue::PopFront(Fifo& fifo) {
  SubtractUntaken(*fifo.front());
  fifo.pop_front();
}

TakenBatch RequestQueue::TakeBatch(absl::Time now, absl::Time start, double seconds_per_token,
                                   int64_t share) {
  TakenBatch batch;
  for (int level = kPriorityLevels - 1; level >= 0; --level) {
    Fifo& fifo = levels_[level];
    while (!fifo.empty()) {
      std::shared_ptr<PendingRequest> head = fifo.front();
      // The sequences of it that fit in what is left of the budgets, until the share is reached.
      int fitting = 0;
      int fitting_tokens = 0;
      for (int s = head->next_sequence;
           s < head->num_sequences() && batch.sequences + fitting < max_batch_sequences_ &&
           batch.tokens + fitting_tokens + SequenceTokens(*head, s) <= max_batch_tokens_ &&
           batch.tokens + fitting_tokens < share;
           ++s) {
        fitting_tokens += SequenceTokens(*head, s);
        ++fitting;
      }
      absl::Status drop = DropStatus(*head, now);
      if (drop.ok() && fitting > 0) {
        drop = LateStatus(*head, now, start, batch.tokens + fitting_tokens, seconds_per_token);
      }
      if (!drop.ok()) {
        PopFront(fifo);
        head->status = std::move(drop);
        head->dropped = true;
        if (head->parts_in_flight == 0) batch.dropped.push_back(std::move(head));
        continue;
      }
      // Nothing of it fits: it keeps its place, first in the next batch.
      if (fitting == 0) return batch;
      BatchPart part{head, head->next_sequence, fitting, fitting_tokens};
      batch.tokens += fitting_tokens;
      batch.sequences += fitting;
      tokens_ -= fitting_tokens;
      level_tokens_[level] -= fitting_tokens;
      sequences_ -= fitting;
      head->next_sequence += fitting;
      ++head->parts_in_flight;
      batch.parts.push_back(std::move(part));
      if (head->next_sequence < head->num_sequences()) {
        // The rest of a request that did not fit waits behind the requests queued after it, so
        // that they get into the next batch instead of waiting for all of its parts; the batch
        // ends here, which also keeps a request to one part per batch.
        fifo.pop_front();
        fifo.push_back(std::move(head));
        return batch;
      }
      PopFront(fifo);
      if (batch.tokens >= share) return batch;
    }
  }
  return batch;
}

void RequestQueue::Remove(const PendingRequest& request) {
  Fifo& fifo = levels_[static_cast<int>(request.request.priority)];
  auto it = std::find_if(
      fifo.begin(), fifo.end(),
      [&](const std::shared_ptr<PendingRequest>& queued) { return queued.get() == &request; });
  if (it == fifo.end()) return;
  SubtractUntaken(request);
  fifo.erase(it);
}

bool RequestQueue::FillsBatch() const {
  return tokens_ >= max_batch_tokens_ || sequences_ >= max_batch_sequences_;
}

int RequestQueue::CancelledRequests() const {
  int cancelled = 0;
  for (const Fifo& fifo : levels_) {
    for (const std::shared_ptr<PendingRequest>& pending : fifo) {
      if (IsCancelled(pending->request)) ++cancelled;
    }
  }
  return cancelled;
}

std::optional<absl::Time> RequestQueue::OldestSubmitTime() const {
  std::optional<absl::Time> oldest;
  for (const Fifo& fifo : levels_) {
    for (const std::shared_ptr<PendingRequest>& pending : fifo) {
      if (!oldest.has_value() || pending->submit_time < *oldest) oldest = pending->submit_time;
    }
  }
  return oldest;
}

int64_t RequestQueue::TokensAtOrAbove(Priority priority) const {
  int64_t tokens = 0;
  for (int level = static_cast<int>(priority); level < kPriorityLevels; ++level) {
    tokens += level_tokens_[level];
  }
  return tokens;
}

}  // namespace dflash::serving
