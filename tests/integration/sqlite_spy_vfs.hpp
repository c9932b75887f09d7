// SPDX-License-Identifier: BSL-1.0
// A SQLite VFS that forwards every call to the default VFS ("unix") and records what makes a
// commit durable: each fsync, by the kind of file it syncs, and each file deletion with its
// `syncDir` flag (whether the directory is fsync'ed after the unlink). Optionally it hides
// shared memory, as a file system that cannot map it would, so SQLite cannot run WAL.
//
// Installed as the process's default VFS for the life of a `spy_vfs` object, so the sinks under
// test use it without knowing; the previous default is restored afterwards.
#pragma once

#include <sqlite3.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace test_support {

class spy_vfs final {
 public:
  enum class file_kind { database, journal, wal, other };

  struct deletion {
    std::string path;
    bool sync_dir;
  };

  /// `shared_memory = false` reports files without xShmMap: SQLite then refuses WAL.
  explicit spy_vfs(bool shared_memory = true) : shared_memory_(shared_memory) {
    if (active_ != nullptr)
      throw std::logic_error("spy_vfs: one at a time");
    real_ = sqlite3_vfs_find(nullptr);
    if (real_ == nullptr)
      throw std::runtime_error("spy_vfs: no default VFS");
    vfs_ = *real_;  // the methods that ignore which VFS they belong to are reused as they are
    vfs_.zName = "commit_order_spy";
    vfs_.pNext = nullptr;
    vfs_.szOsFile = static_cast<int>(sizeof(spy_file)) + real_->szOsFile;
    vfs_.xOpen = &open;
    vfs_.xDelete = &remove;
    vfs_.xAccess = [](sqlite3_vfs*, const char* name, int flags, int* out) {
      return active_->real_->xAccess(active_->real_, name, flags, out);
    };
    vfs_.xFullPathname = [](sqlite3_vfs*, const char* name, int n, char* out) {
      return active_->real_->xFullPathname(active_->real_, name, n, out);
    };
    active_ = this;
    if (sqlite3_vfs_register(&vfs_, 1) != SQLITE_OK) {
      active_ = nullptr;
      throw std::runtime_error("spy_vfs: cannot register");
    }
  }
  spy_vfs(const spy_vfs&) = delete;
  spy_vfs& operator=(const spy_vfs&) = delete;
  ~spy_vfs() {
    sqlite3_vfs_unregister(&vfs_);
    sqlite3_vfs_register(real_, 1);  // the default again
    active_ = nullptr;
  }

  /// fsyncs of files of `kind` so far.
  [[nodiscard]] int syncs(file_kind kind) const noexcept {
    return syncs_[static_cast<std::size_t>(kind)];
  }
  [[nodiscard]] const std::vector<deletion>& deletions() const noexcept { return deletions_; }
  void clear() {
    for (int& n : syncs_)
      n = 0;
    deletions_.clear();
  }

 private:
  struct spy_file {
    sqlite3_file base;  // first: SQLite sees a spy_file as a sqlite3_file
    sqlite3_file* real;
    file_kind kind;
  };

  static sqlite3_file* real(sqlite3_file* f) { return reinterpret_cast<spy_file*>(f)->real; }

  static file_kind kind_of(int flags) {
    if ((flags & SQLITE_OPEN_MAIN_DB) != 0)
      return file_kind::database;
    if ((flags & SQLITE_OPEN_MAIN_JOURNAL) != 0)
      return file_kind::journal;
    if ((flags & SQLITE_OPEN_WAL) != 0)
      return file_kind::wal;
    return file_kind::other;
  }

  static int open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
    auto* spy = reinterpret_cast<spy_file*>(f);
    spy->real = reinterpret_cast<sqlite3_file*>(spy + 1);
    spy->kind = kind_of(flags);
    spy->base.pMethods = nullptr;
    const int rc = active_->real_->xOpen(active_->real_, name, spy->real, flags, out_flags);
    if (spy->real->pMethods != nullptr)
      spy->base.pMethods = active_->shared_memory_ ? &methods_v3 : &methods_v1;
    return rc;
  }

  static int remove(sqlite3_vfs*, const char* path, int sync_dir) {
    active_->deletions_.push_back({path, sync_dir != 0});
    return active_->real_->xDelete(active_->real_, path, sync_dir);
  }

  static int close(sqlite3_file* f) {
    const int rc = real(f)->pMethods->xClose(real(f));
    f->pMethods = nullptr;
    return rc;
  }
  static int sync(sqlite3_file* f, int flags) {
    ++active_->syncs_[static_cast<std::size_t>(reinterpret_cast<spy_file*>(f)->kind)];
    return real(f)->pMethods->xSync(real(f), flags);
  }

  static constexpr sqlite3_io_methods make_methods(int version) {
    sqlite3_io_methods m{};
    m.iVersion = version;
    m.xClose = &close;
    m.xRead = [](sqlite3_file* f, void* p, int n, sqlite3_int64 at) {
      return real(f)->pMethods->xRead(real(f), p, n, at);
    };
    m.xWrite = [](sqlite3_file* f, const void* p, int n, sqlite3_int64 at) {
      return real(f)->pMethods->xWrite(real(f), p, n, at);
    };
    m.xTruncate = [](sqlite3_file* f, sqlite3_int64 size) {
      return real(f)->pMethods->xTruncate(real(f), size);
    };
    m.xSync = &sync;
    m.xFileSize = [](sqlite3_file* f, sqlite3_int64* size) {
      return real(f)->pMethods->xFileSize(real(f), size);
    };
    m.xLock = [](sqlite3_file* f, int l) { return real(f)->pMethods->xLock(real(f), l); };
    m.xUnlock = [](sqlite3_file* f, int l) { return real(f)->pMethods->xUnlock(real(f), l); };
    m.xCheckReservedLock = [](sqlite3_file* f, int* out) {
      return real(f)->pMethods->xCheckReservedLock(real(f), out);
    };
    m.xFileControl = [](sqlite3_file* f, int op, void* arg) {
      return real(f)->pMethods->xFileControl(real(f), op, arg);
    };
    m.xSectorSize = [](sqlite3_file* f) { return real(f)->pMethods->xSectorSize(real(f)); };
    m.xDeviceCharacteristics = [](sqlite3_file* f) {
      return real(f)->pMethods->xDeviceCharacteristics(real(f));
    };
    if (version >= 2) {
      m.xShmMap = [](sqlite3_file* f, int page, int size, int extend, void volatile** out) {
        return real(f)->pMethods->xShmMap(real(f), page, size, extend, out);
      };
      m.xShmLock = [](sqlite3_file* f, int offset, int n, int flags) {
        return real(f)->pMethods->xShmLock(real(f), offset, n, flags);
      };
      m.xShmBarrier = [](sqlite3_file* f) { real(f)->pMethods->xShmBarrier(real(f)); };
      m.xShmUnmap = [](sqlite3_file* f, int del) {
        return real(f)->pMethods->xShmUnmap(real(f), del);
      };
    }
    if (version >= 3) {
      m.xFetch = [](sqlite3_file* f, sqlite3_int64 at, int n, void** out) {
        return real(f)->pMethods->xFetch(real(f), at, n, out);
      };
      m.xUnfetch = [](sqlite3_file* f, sqlite3_int64 at, void* p) {
        return real(f)->pMethods->xUnfetch(real(f), at, p);
      };
    }
    return m;
  }

  static inline const sqlite3_io_methods methods_v3 = make_methods(3);
  static inline const sqlite3_io_methods methods_v1 = make_methods(1);
  static inline spy_vfs* active_ = nullptr;

  bool shared_memory_;
  sqlite3_vfs* real_ = nullptr;
  sqlite3_vfs vfs_{};
  int syncs_[4]{};
  std::vector<deletion> deletions_;
};

}  // namespace test_support
