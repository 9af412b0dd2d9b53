#pragma once

#include "store/store.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

// The one rule for what enters the change log: a change is logged when, and
// only when, it moves its URI's logged history forward, with its own time,
// once. Every way of syncing (baselines, audits and repairs, incrementals
// and their overlaps, resumptions, retries, dumps, OAI-PMH windows, IIIF
// re-reads) proposes the changes it knows happened upstream; each store
// (PgStore, MemoryStore) passes them through `admit` inside the transaction
// that applies them, against the URI's last logged entry, and logs only
// what it admits. A follower of our Change Lists may therefore rely on:
//   - per URI, logged upstream times never go back;
//   - no (URI, change, upstream time) is logged twice;
//   - a change read again (an overlap, a repair that moved the watermark
//     back, a retry, a `created` listed again by a dump) logs nothing.
// `check_history` (store/history_check.h) verifies this over a whole log.
namespace tributary::store {

// What the change log says of one URI now: its last entry.
struct LogHead {
  rs::Change change = rs::Change::updated;
  std::optional<Timestamp> time; // its upstream time (none: the Source gave none)
  std::vector<rs::HashValue> hashes;
  std::optional<std::string> blob_sha256;

  bool deleted() const { return change == rs::Change::deleted; }
};

LogHead head_of(const ChangeRecord& c);

// Whether two states are the same: both deleted, or both live with bytes
// that agree on every digest both know (true), differ on one (false);
// nullopt when they share no digest to compare.
std::optional<bool> same_state(const LogHead& a, const LogHead& b);

// What to do with one proposed change.
struct Admission {
  bool log = false;
  // The time it is logged with: its own; or, for a change we applied whose
  // upstream time is not after the last logged one (a Source whose clock
  // went back), one microsecond after that one, so that times never go back.
  std::optional<Timestamp> time;
};

// The rule, against the URI's last logged entry (none: nothing logged yet):
//   - nothing logged yet: logged;
//   - a deletion of what the log says is deleted: not logged;
//   - both timed: older is not logged; the same time is logged only when the
//     state provably differs (two changes within one tick of the Source's
//     clock); newer is logged;
//   - either untimed: logged only when the state differs (or cannot be
//     compared), so the very change and bytes read again log nothing (our
//     clock is never compared with the Source's).
// `applied`: the change's state is what the store now holds (its bytes were
// fetched and stored): if it is not logged by time alone, yet differs from
// the log, it is logged just after the head, or the log would disagree with
// what we hold.
Admission admit(const std::optional<LogHead>& head, const ChangeRecord& c, bool applied);
Admission admit(const LogHead* head, const ChangeRecord& c, bool applied);

// One change admitted: which, and the time it is logged with.
struct Admitted {
  const ChangeRecord* change;
  std::optional<Timestamp> time;
};

// Admits `proposed` in order, each against the head the ones before left:
// returns what to log (times as admitted) and leaves `heads` at the new last
// entries. `held_after` names the URIs whose state the same transaction
// stores (the batch's upserts): their changes count as applied.
// admit_each names the admitted changes in `proposed` (no copies: a first
// baseline admits every change, and copying them was a sixth of the
// committer's time); admit_all returns copies with their logged times.
// With `keep_heads` false, `heads` is left as the batch needs it and no
// more: a URI's new head is kept only where a later change of the batch
// names it again (PgStore reads the heads anew for every batch; a head
// kept for each of a first baseline's changes was 6 of its 96 allocations
// a resource).
std::vector<Admitted> admit_each(std::unordered_map<std::string, LogHead>& heads,
                                 const std::vector<ChangeRecord>& proposed,
                                 const std::unordered_map<std::string, const ResourceRecord*>& held_after,
                                 bool keep_heads = true);
std::vector<ChangeRecord> admit_all(std::unordered_map<std::string, LogHead>& heads,
                                    const std::vector<ChangeRecord>& proposed,
                                    const std::unordered_map<std::string, const ResourceRecord*>& held_after);

} // namespace tributary::store
