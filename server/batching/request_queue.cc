#include "server/batching/request_queue.h"

#include <algorithm>
#include <utility>

namespace dflash::serving {
namespace {

int SequenceTokens(const PendingRequest& request, int sequence) {
  return static_cast<int>(request.request.sequences[sequence].ids.size());
}

bool IsCancelled(const InferenceRequest& request) {
  return request.cancelled != nullptr && request.cancelled->load(std::memory_order_acquire);
}

// DEADLINE_EXCEEDED or CANCELLED when the request must not be computed (further); OK otherwise.
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

}  // namespace

RequestQueue::RequestQueue(int max_batch_tokens, int max_batch_sequences)
    : max_batch_tokens_(max_batch_tokens), max_batch_sequences_(max_batch_sequences) {}

void RequestQueue::Push(std::shared_ptr<PendingRequest> request) {
  ++requests_;
  sequences_ += request->num_sequences() - request->next_sequence;
  for (int s = request->next_sequence; s < request->num_sequences(); ++s) {
    tokens_ += SequenceTokens(*request, s);
  }
  levels_[static_cast<int>(request->request.priority)].push_back(std::move(request));
}

void RequestQueue::SubtractUntaken(const PendingRequest& request) {
  --requests_;
  sequences_ -= request.num_sequences() - request.next_sequence;
  for (int s = request.next_sequence; s < request.num_sequences(); ++s) {
    tokens_ -= SequenceTokens(request, s);
  }
}

void RequestQueue::PopFront(Fifo& fifo) {
  SubtractUntaken(*fifo.front());
  fifo.pop_front();
}

TakenBatch RequestQueue::TakeBatch(absl::Time now) {
  TakenBatch batch;
  for (int level = kPriorityLevels - 1; level >= 0; --level) {
    Fifo& fifo = levels_[level];
    while (!fifo.empty()) {
      std::shared_ptr<PendingRequest> head = fifo.front();
      if (absl::Status drop = DropStatus(*head, now); !drop.ok()) {
        PopFront(fifo);
        head->status = std::move(drop);
        head->dropped = true;
        if (head->parts_in_flight == 0) batch.dropped.push_back(std::move(head));
        continue;
      }
      BatchPart part{head, head->next_sequence, 0};
      while (head->next_sequence < head->num_sequences() &&
             batch.sequences < max_batch_sequences_ &&
             batch.tokens + SequenceTokens(*head, head->next_sequence) <= max_batch_tokens_) {
        const int length = SequenceTokens(*head, head->next_sequence);
        batch.tokens += length;
        tokens_ -= length;
        ++batch.sequences;
        --sequences_;
        ++part.num_sequences;
        ++head->next_sequence;
      }
      if (part.num_sequences > 0) {
        ++head->parts_in_flight;
        batch.parts.push_back(std::move(part));
      }
      // The rest of a request that did not fit stays at the head of its level for the next batch.
      if (head->next_sequence < head->num_sequences()) return batch;
      PopFront(fifo);
    }
  }
  return batch;
}

void RequestQueue::Remove(const PendingRequest& request) {
  Fifo& fifo = levels_[static_cast<int>(request.request.priority)];
  // A request with a part taken is at the head of its level, so this finds it at once.
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
    if (fifo.empty()) continue;
    const absl::Time head_time = fifo.front()->submit_time;
    if (!oldest.has_value() || head_time < *oldest) oldest = head_time;
  }
  return oldest;
}

}  // namespace dflash::serving
