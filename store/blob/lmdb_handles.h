#pragma once

// LMDB handles that let go when they go: a transaction aborts unless
// committed, a cursor closes. For the blob index's rooms (blob_index.cpp,
// recent_names.cpp); not for use outside store/blob/.

#include <lmdb.h>

namespace tributary::store::blob_detail {

// A transaction that aborts unless committed.
struct Txn {
  MDB_txn* txn = nullptr;
  Txn() = default;
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  ~Txn() {
    if (txn) {
      mdb_txn_abort(txn);
    }
  }
  int commit() {
    const int rc = mdb_txn_commit(txn);
    txn = nullptr;
    return rc;
  }
};

// A cursor closed when it goes.
struct Cursor {
  MDB_cursor* c = nullptr;
  Cursor() = default;
  Cursor(const Cursor&) = delete;
  Cursor& operator=(const Cursor&) = delete;
  ~Cursor() {
    if (c) {
      mdb_cursor_close(c);
    }
  }
};

} // namespace tributary::store::blob_detail
