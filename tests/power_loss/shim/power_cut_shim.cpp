// SPDX-License-Identifier: BSL-1.0
// power_cut_shim.cpp — a simulated power cut for real processes, as an LD_PRELOAD library.
//
//   LD_PRELOAD=libcommit_order_power_cut.so COMMIT_ORDER_POWER_CUT_ROOT=<dir> <program>
//
// A process killed with SIGKILL keeps the page cache: everything it wrote is still read back.
// A power cut keeps only what reached the disk. This library lets a test see the second: it
// watches the files and directories under one root directory, keeps aside the image that would
// survive a power cut at each moment (the "durable image"), and on request rewrites the root to
// exactly that image, so the test can recover from what a machine would find after a reboot.
//
// ---- The model (conservative: it keeps the least a POSIX file system promises) -------------
//
//  * A file's content is durable only as of its last fsync()/fdatasync(): at that call the whole
//    file (bytes and length) is copied into the durable image. Writes, pwrite()s, ftruncate()s
//    after it are lost at the cut, whichever call made them. That is why write/pwrite/writev/
//    ftruncate need no wrapper here: the content is read back from the file at its sync, and
//    what the process did in between does not matter.
//  * A directory entry (a creation, a rename, an unlink, a mkdir) is durable only once its
//    directory has been fsync'ed (or fdatasync'ed: SQLite syncs directories that way). Then the
//    directory's whole listing, name -> inode, becomes durable at once. So rename/unlink need no
//    wrapper either: the listing is read back from the directory at its sync.
//  * A file whose name was never made durable vanishes at the cut, even if its data was synced.
//    A durable name whose inode content was never synced is an empty file. An unlink or rename
//    that was not followed by a directory sync is undone: the old name comes back, with the
//    content its inode had at its own last sync. A directory whose own listing was never synced
//    comes back empty.
//  * What the shim must see is therefore: every sync (the cut points), every creation of an
//    inode (open/openat/creat with O_CREAT, mkdir/mkdirat), so that an inode number the kernel
//    reuses after an unlink is not mistaken for the file that had it before, and close (to know
//    which descriptors still point into the root).
//
// The calls were chosen from what the code under test imports (`nm -D --undefined-only`):
// libsqlite3.so.0 uses open64, pwrite64, write, ftruncate64, fdatasync (for files and for
// directories; it never calls fsync), unlink, mkdir, rmdir and close; libstdc++ (std::filesystem,
// std::rename) uses open, openat, write, writev, rename, unlinkat, remove, truncate and mkdir; the
// file adapter calls open, write, pread, fdatasync, fsync, ftruncate, rename and close directly.
// Of these the shim wraps the opens (all variants, the _FORTIFY_SOURCE ones included), mkdir,
// fsync, fdatasync and close; the others change only what a later sync reads back.
//
// Real syncs of watched files are skipped (the call returns 0 at once): the durable image is
// the shim's own, and the power_loss tier would otherwise spend its time waiting for the disk.
//
// Not modelled (refused or ignored, never silently wrong): O_SYNC/O_DSYNC opens under the root
// abort the process with a message; sync(), syncfs(), msync() and sync_file_range() are not
// intercepted (nothing under test calls them); symlinks and special files are left out of the
// image; a file created through a path the shim cannot see (fopen, libc-internal calls) is
// treated as created when the shim first meets it. An inode linked under two names after the
// cut is written as two files.
//
// ---- Cut points ----------------------------------------------------------------------------
//
// Every fsync/fdatasync of a watched file or directory is a sync point, counted from 1 since
// the last reset. Armed at N, the power goes out *at* the N-th sync point: that sync and
// everything after it make nothing durable (the calls still return success, the process runs
// on, its writes still reach the real files). An operation during which the cut happened was
// not acknowledged; the test learns it with commit_order_power_cut_happened() after each one.
//
// ---- Control (resolved by the test with dlsym(RTLD_DEFAULT, ...): it does not link this) ----
//
//   int  commit_order_power_cut_reset(const char* root)   watch `root` (NULL: the same root);
//        whatever it holds now is the durable image; counters cleared, disarmed. 0 or -1/errno.
//   void commit_order_power_cut_arm(unsigned long long n) cut at the n-th sync point (0: never)
//   unsigned long long commit_order_power_cut_syncs(void) sync points seen since the reset
//   int  commit_order_power_cut_happened(void)            1 once the power is out
//   int  commit_order_power_cut_materialise(unsigned long long tail_seed)
//        the power goes out now (if it has not); every descriptor into the root must be closed.
//        Rewrites the root to its durable image, then resets (the image is the new baseline).
//        tail_seed 0 gives the model above. Otherwise, for each file whose content when the
//        power went out was its durable content followed by unsynced appended bytes, a prefix
//        of those bytes chosen by the seed survives as well: a torn append, as a disk that wrote
//        some of the pages of an append but not the rest leaves it (what the process wrote
//        after the cut never counts). 0 or -1/errno (EBUSY: a file is still open).
//
// Environment, for a process that does not call the control functions itself:
//   COMMIT_ORDER_POWER_CUT_ROOT                  watch this directory from the start
//   COMMIT_ORDER_POWER_CUT_AT                    arm at this sync point
//   COMMIT_ORDER_POWER_CUT_MATERIALISE_AT_EXIT   1: materialise (tail seed 0) when it exits
//   COMMIT_ORDER_POWER_CUT_TRACE                 1: print each sync point (number, path) on stderr,
//                                                to see where cut point N falls
// A process killed before it materialises leaves the real files as they are (what a SIGKILL
// leaves, not what a power cut leaves): the image lives in the process's memory.
//
// Linux/glibc only (/proc/self/fd, RTLD_NEXT). Thread-safe: one mutex guards the bookkeeping.
#undef _FORTIFY_SOURCE  // the fortified inline open() of <fcntl.h> would clash with ours

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

// ---- the next definitions of what we wrap ----------------------------------------------------

using open_fn = int (*)(const char*, int, ...);
using openat_fn = int (*)(int, const char*, int, ...);
using creat_fn = int (*)(const char*, mode_t);
using open2_fn = int (*)(const char*, int);
using openat2_fn = int (*)(int, const char*, int);
using close_fn = int (*)(int);
using sync_fn = int (*)(int);
using mkdir_fn = int (*)(const char*, mode_t);
using mkdirat_fn = int (*)(int, const char*, mode_t);

template <class F>
F next_definition(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

struct real_calls {
  open_fn open = next_definition<open_fn>("open");
  open_fn open64 = next_definition<open_fn>("open64");
  openat_fn openat = next_definition<openat_fn>("openat");
  openat_fn openat64 = next_definition<openat_fn>("openat64");
  creat_fn creat = next_definition<creat_fn>("creat");
  creat_fn creat64 = next_definition<creat_fn>("creat64");
  open2_fn open_2 = next_definition<open2_fn>("__open_2");
  open2_fn open64_2 = next_definition<open2_fn>("__open64_2");
  openat2_fn openat_2 = next_definition<openat2_fn>("__openat_2");
  openat2_fn openat64_2 = next_definition<openat2_fn>("__openat64_2");
  close_fn close = next_definition<close_fn>("close");
  sync_fn fsync = next_definition<sync_fn>("fsync");
  sync_fn fdatasync = next_definition<sync_fn>("fdatasync");
  mkdir_fn mkdir = next_definition<mkdir_fn>("mkdir");
  mkdirat_fn mkdirat = next_definition<mkdirat_fn>("mkdirat");
};

// Resolved on first use (a wrapper may run before this library's constructors) and never
// destroyed: descriptors are closed by other libraries' destructors after ours have run.
const real_calls& real() {
  static const real_calls* calls = new real_calls();
  return *calls;
}

[[noreturn]] void fatal(const char* what, const std::string& detail) {
  std::fprintf(stderr, "commit_order power-cut shim: %s%s%s\n", what, detail.empty() ? "" : ": ",
               detail.c_str());
  std::abort();
}

// ---- the durable image -----------------------------------------------------------------------

struct inode_key {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const inode_key&) const = default;
};
struct inode_hash {
  std::size_t operator()(const inode_key& k) const noexcept {
    return std::hash<std::uint64_t>()(static_cast<std::uint64_t>(k.ino) * 1000003U ^
                                      static_cast<std::uint64_t>(k.dev));
  }
};

// One inode as the durable image knows it. An inode the kernel frees and hands out again gets a
// new object: the old one lives on wherever a durable listing still names it.
struct object {
  bool directory = false;
  mode_t mode = 0644;
  std::string content;                         // a file's bytes as of its last sync
  std::map<std::string, std::size_t> entries;  // a directory's listing as of its last sync
};

struct shim_state {
  std::mutex mutex;
  std::atomic<bool> active = false;  // also read outside the mutex, before an open
  std::string root;                  // canonical, without a trailing slash
  std::vector<object> objects;
  std::size_t root_object = 0;
  std::unordered_map<inode_key, std::size_t, inode_hash> live;  // inode now -> object
  std::unordered_map<int, std::size_t> descriptors;             // open fd into the root -> object
  std::uint64_t syncs = 0;
  std::uint64_t cut_at = 0;  // 0: never
  bool cut = false;
  std::map<std::size_t, std::string> at_cut;  // each live file's bytes when the power went out
  bool trace = false;
};

shim_state& state() {
  static shim_state* s = new shim_state();  // never destroyed, as real() above
  return *s;
}

std::string descriptor_path(int fd) {
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  char target[PATH_MAX];
  const ssize_t n = ::readlink(link, target, sizeof target - 1);
  if (n < 0)
    return {};
  return std::string(target, static_cast<std::size_t>(n));
}

bool under_root(const shim_state& s, const std::string& path) {
  return path == s.root ||
         (path.size() > s.root.size() && path.compare(0, s.root.size(), s.root) == 0 &&
          path[s.root.size()] == '/');
}

std::size_t new_object(shim_state& s, const struct stat& st) {
  object o;
  o.directory = S_ISDIR(st.st_mode);
  o.mode = st.st_mode & 07777;
  s.objects.push_back(std::move(o));
  const std::size_t index = s.objects.size() - 1;
  s.live[inode_key{st.st_dev, st.st_ino}] = index;
  return index;
}

std::size_t object_of(shim_state& s, const struct stat& st) {
  const auto it = s.live.find(inode_key{st.st_dev, st.st_ino});
  return it != s.live.end() ? it->second : new_object(s, st);
}

// Reads a whole file through a descriptor of its own: the caller's may be write-only.
bool read_file(int dirfd, const char* path, std::string& out) {
  const int fd = real().openat(dirfd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  out.clear();
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      real().close(fd);
      return n == 0;
    }
    out.append(buffer, static_cast<std::size_t>(n));
  }
}

void reopen_path(int fd, char (&out)[64]) {
  std::snprintf(out, sizeof out, "/proc/self/fd/%d", fd);
}

// The listing of the directory open as `dirfd`, as objects (regular files and directories).
std::map<std::string, std::size_t> read_listing(shim_state& s, int dirfd) {
  std::map<std::string, std::size_t> entries;
  const int own = real().openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (own < 0)
    fatal("cannot reopen a directory to read its listing", std::strerror(errno));
  DIR* d = ::fdopendir(own);
  if (d == nullptr)
    fatal("fdopendir", std::strerror(errno));
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..")
      continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;  // gone since readdir saw it
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
      entries[name] = object_of(s, st);
  }
  ::closedir(d);
  return entries;
}

// The sync of a watched descriptor: the file's bytes, or the directory's listing, become durable.
void capture(shim_state& s, int fd, std::size_t index) {
  char path[64];
  reopen_path(fd, path);
  if (s.objects[index].directory) {
    const int dirfd = real().open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
      fatal("cannot reopen a synced directory", std::strerror(errno));
    auto entries = read_listing(s, dirfd);
    real().close(dirfd);
    s.objects[index].entries = std::move(entries);
  } else {
    std::string bytes;
    if (!read_file(AT_FDCWD, path, bytes))
      fatal("cannot read back a synced file", descriptor_path(fd) + ": " + std::strerror(errno));
    s.objects[index].content = std::move(bytes);
  }
}

// The object a descriptor points at, if it is under the root.
bool watched(shim_state& s, int fd, std::size_t& index) {
  const auto it = s.descriptors.find(fd);
  if (it != s.descriptors.end()) {
    index = it->second;
    return true;
  }
  // Opened before the reset or through a call the shim does not wrap.
  if (!under_root(s, descriptor_path(fd)))
    return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
    return false;
  index = object_of(s, st);
  s.descriptors[fd] = index;
  return true;
}

// Everything under `dirfd` becomes durable as it is now (the baseline of a reset).
std::size_t snapshot_directory(shim_state& s, int dirfd, const struct stat& st, int depth) {
  if (depth > 64)
    fatal("directory tree too deep under the root", s.root);
  const std::size_t index = new_object(s, st);
  std::map<std::string, std::size_t> entries;
  const int own = real().openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (own < 0)
    fatal("cannot open a directory under the root", std::strerror(errno));
  DIR* d = ::fdopendir(own);
  if (d == nullptr)
    fatal("fdopendir", std::strerror(errno));
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..")
      continue;
    struct stat child {};
    if (::fstatat(::dirfd(d), e->d_name, &child, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    if (S_ISDIR(child.st_mode)) {
      const int sub = real().openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (sub < 0)
        fatal("cannot open a directory under the root", name);
      entries[name] = snapshot_directory(s, sub, child, depth + 1);
      real().close(sub);
    } else if (S_ISREG(child.st_mode)) {
      const std::size_t file = new_object(s, child);
      if (!read_file(::dirfd(d), e->d_name, s.objects[file].content))
        fatal("cannot read a file under the root", name);
      entries[name] = file;
    }
  }
  ::closedir(d);
  s.objects[index].entries = std::move(entries);
  return index;
}

int reset_locked(shim_state& s, const char* root) {
  std::string canonical = s.root;
  if (root != nullptr) {
    char resolved[PATH_MAX];
    if (::realpath(root, resolved) == nullptr)
      return -1;
    canonical = resolved;
  }
  if (canonical.empty()) {
    errno = EINVAL;
    return -1;
  }
  const int rootfd = real().open(canonical.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0)
    return -1;
  struct stat st {};
  ::fstat(rootfd, &st);
  s.root = canonical;
  s.objects.clear();
  s.live.clear();
  s.root_object = snapshot_directory(s, rootfd, st, 0);
  real().close(rootfd);
  // Descriptors kept open across the reset now point at the new baseline's objects.
  for (auto it = s.descriptors.begin(); it != s.descriptors.end();) {
    struct stat fst {};
    const auto found = ::fstat(it->first, &fst) == 0
                           ? s.live.find(inode_key{fst.st_dev, fst.st_ino})
                           : s.live.end();
    if (found == s.live.end()) {
      it = s.descriptors.erase(it);
    } else {
      it->second = found->second;
      ++it;
    }
  }
  s.syncs = 0;
  s.cut_at = 0;
  s.cut = false;
  s.at_cut.clear();
  s.active = true;
  return 0;
}

// ---- materialising ---------------------------------------------------------------------------

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void find_live_files(shim_state& s, int dirfd, const std::string& path, int depth,
                     std::map<std::size_t, std::string>& found) {
  if (depth > 64)
    return;
  const int own = real().openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (own < 0)
    return;
  DIR* d = ::fdopendir(own);
  if (d == nullptr)
    return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..")
      continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    const auto it = s.live.find(inode_key{st.st_dev, st.st_ino});
    if (S_ISREG(st.st_mode) && it != s.live.end()) {
      found.emplace(it->second, path + "/" + name);
    } else if (S_ISDIR(st.st_mode)) {
      const int sub = real().openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (sub >= 0) {
        find_live_files(s, sub, path + "/" + name, depth + 1, found);
        real().close(sub);
      }
    }
  }
  ::closedir(d);
}

// The moment the power goes out: what each watched file holds then is the most a torn append
// can leave (writes the process makes after the cut never reach the disk).
void power_goes_out(shim_state& s) {
  if (s.cut)
    return;
  s.cut = true;
  s.at_cut.clear();
  std::map<std::size_t, std::string> found;
  const int rootfd = real().open(s.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0)
    return;
  find_live_files(s, rootfd, s.root, 0, found);
  real().close(rootfd);
  for (const auto& [index, path] : found) {
    std::string bytes;
    if (read_file(AT_FDCWD, path.c_str(), bytes))
      s.at_cut.emplace(index, std::move(bytes));
  }
}

// The durable content of every file, with the torn appends a non-zero seed adds.
std::vector<std::string> image_contents(const shim_state& s, std::uint64_t tail_seed) {
  std::vector<std::string> contents;
  contents.reserve(s.objects.size());
  for (const auto& o : s.objects)
    contents.push_back(o.content);
  if (tail_seed == 0)
    return contents;
  for (const auto& [index, then] : s.at_cut) {
    const std::string& durable = s.objects[index].content;
    if (then.size() <= durable.size() || then.compare(0, durable.size(), durable) != 0)
      continue;  // not an append since the last sync: nothing can be torn
    const std::size_t extra = then.size() - durable.size();
    const std::size_t kept = static_cast<std::size_t>(mix(tail_seed ^ mix(index)) % (extra + 1));
    contents[index] = then.substr(0, durable.size() + kept);
  }
  return contents;
}

bool remove_contents(int dirfd, int depth) {
  if (depth > 64)
    return false;
  const int own = real().openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (own < 0)
    return false;
  DIR* d = ::fdopendir(own);
  if (d == nullptr)
    return false;
  std::vector<std::pair<std::string, bool>> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..")
      continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
      names.emplace_back(name, S_ISDIR(st.st_mode));
  }
  bool ok = true;
  for (const auto& [name, is_dir] : names) {
    if (is_dir) {
      const int sub = real().openat(::dirfd(d), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      ok = ok && sub >= 0 && remove_contents(sub, depth + 1);
      if (sub >= 0)
        real().close(sub);
    }
    ok = ok && ::unlinkat(::dirfd(d), name.c_str(), is_dir ? AT_REMOVEDIR : 0) == 0;
  }
  ::closedir(d);
  return ok;
}

bool write_all(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool write_directory(const shim_state& s, const std::vector<std::string>& contents, int dirfd,
                     std::size_t index, std::vector<std::size_t>& ancestors) {
  if (ancestors.size() > 64)
    return false;
  ancestors.push_back(index);
  bool ok = true;
  for (const auto& [name, child] : s.objects[index].entries) {
    const object& o = s.objects[child];
    if (o.directory) {
      bool cycle = false;
      for (std::size_t a : ancestors)
        cycle = cycle || a == child;
      if (cycle)
        continue;  // a directory renamed into its own subtree: not a state a disk can hold
      ok = ok && real().mkdirat(dirfd, name.c_str(), o.mode | 0700) == 0;
      const int sub = real().openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      ok = ok && sub >= 0 && write_directory(s, contents, sub, child, ancestors);
      if (sub >= 0)
        real().close(sub);
    } else {
      const int fd = real().openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                                   o.mode | 0600);
      ok = ok && fd >= 0 && write_all(fd, contents[child]);
      if (fd >= 0)
        real().close(fd);
    }
  }
  ancestors.pop_back();
  return ok;
}

int materialise_locked(shim_state& s, std::uint64_t tail_seed) {
  if (!s.active) {
    errno = EINVAL;
    return -1;
  }
  power_goes_out(s);
  // A descriptor still open would go on writing into a file the image replaces.
  std::string still_open;
  for (auto it = s.descriptors.begin(); it != s.descriptors.end();) {
    if (::fcntl(it->first, F_GETFD) < 0) {  // closed by a call the shim does not wrap
      it = s.descriptors.erase(it);
      continue;
    }
    still_open += " " + descriptor_path(it->first);
    ++it;
  }
  if (!still_open.empty()) {
    std::fprintf(stderr, "commit_order power-cut shim: cannot materialise, still open:%s\n",
                 still_open.c_str());
    errno = EBUSY;
    return -1;
  }
  const std::vector<std::string> contents = image_contents(s, tail_seed);
  const int rootfd = real().open(s.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0)
    return -1;
  std::vector<std::size_t> ancestors;
  const bool ok =
      remove_contents(rootfd, 0) && write_directory(s, contents, rootfd, s.root_object, ancestors);
  real().close(rootfd);
  if (!ok)
    return -1;
  return reset_locked(s, nullptr);
}

// ---- the wrappers' shared parts --------------------------------------------------------------

bool takes_mode(int flags) {
  return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE;
}

// Before an open: whether it may create the file (so its inode must be a new object).
bool will_create(int dirfd, const char* path, int flags) {
  if (!takes_mode(flags) || path == nullptr)
    return false;
  if ((flags & O_TMPFILE) == O_TMPFILE)
    return true;
  struct stat st {};
  return ::fstatat(dirfd, path, &st, 0) != 0 && errno == ENOENT;
}

int after_open(int fd, int flags, bool created) {
  if (fd < 0)
    return fd;
  const int saved = errno;
  shim_state& s = state();
  std::lock_guard lock(s.mutex);
  s.descriptors.erase(fd);  // a number closed behind the shim's back and handed out again
  if (s.active && under_root(s, descriptor_path(fd))) {
    if ((flags & O_DSYNC) != 0)
      fatal("O_SYNC/O_DSYNC writes are not modelled; refusing to watch", descriptor_path(fd));
    struct stat st {};
    if (::fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
      s.descriptors[fd] = created ? new_object(s, st) : object_of(s, st);
  }
  errno = saved;
  return fd;
}

int open_common(open_fn real_open, int dirfd, const char* path, int flags, mode_t mode) {
  const bool created = state().active && will_create(dirfd, path, flags);
  const int fd = takes_mode(flags) ? real_open(path, flags, mode) : real_open(path, flags);
  return after_open(fd, flags, created);
}

int openat_common(openat_fn real_openat, int dirfd, const char* path, int flags, mode_t mode) {
  const bool created = state().active && will_create(dirfd, path, flags);
  const int fd =
      takes_mode(flags) ? real_openat(dirfd, path, flags, mode) : real_openat(dirfd, path, flags);
  return after_open(fd, flags, created);
}

int sync_common(sync_fn real_sync, int fd) {
  {
    shim_state& s = state();
    std::lock_guard lock(s.mutex);
    std::size_t index = 0;
    if (s.active && watched(s, fd, index)) {
      ++s.syncs;
      if (s.cut_at != 0 && s.syncs >= s.cut_at)
        power_goes_out(s);
      if (s.trace)
        std::fprintf(stderr, "commit_order power-cut shim: sync point %llu%s: %s\n",
                     static_cast<unsigned long long>(s.syncs), s.cut ? " (power out)" : "",
                     descriptor_path(fd).c_str());
      if (!s.cut)
        capture(s, fd, index);
      return 0;
    }
  }
  return real_sync(fd);
}

int mkdir_common(int result, int dirfd, const char* path) {
  if (result != 0 || !state().active)
    return result;
  const int saved = errno;
  const int fd = real().openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    shim_state& s = state();
    std::lock_guard lock(s.mutex);
    struct stat st {};
    if (s.active && under_root(s, descriptor_path(fd)) && ::fstat(fd, &st) == 0)
      new_object(s, st);
    real().close(fd);
  }
  errno = saved;
  return result;
}

mode_t variadic_mode(int flags, va_list args) {
  return takes_mode(flags) ? static_cast<mode_t>(va_arg(args, unsigned int)) : 0;
}

void at_load() __attribute__((constructor));
void at_load() {
  (void)real();
  if (const char* trace = std::getenv("COMMIT_ORDER_POWER_CUT_TRACE"))
    state().trace = std::strcmp(trace, "1") == 0;
  const char* root = std::getenv("COMMIT_ORDER_POWER_CUT_ROOT");
  if (root == nullptr || *root == '\0')
    return;
  shim_state& s = state();
  std::lock_guard lock(s.mutex);
  if (reset_locked(s, root) != 0)
    fatal("cannot watch COMMIT_ORDER_POWER_CUT_ROOT",
          std::string(root) + ": " + std::strerror(errno));
  if (const char* at = std::getenv("COMMIT_ORDER_POWER_CUT_AT"))
    s.cut_at = std::strtoull(at, nullptr, 10);
}

void at_unload() __attribute__((destructor));
void at_unload() {
  const char* flag = std::getenv("COMMIT_ORDER_POWER_CUT_MATERIALISE_AT_EXIT");
  if (flag == nullptr || std::strcmp(flag, "1") != 0)
    return;
  shim_state& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.active)
    return;
  const std::uint64_t syncs = s.syncs;
  const bool cut = s.cut;
  if (materialise_locked(s, 0) != 0) {
    std::fprintf(stderr, "commit_order power-cut shim: materialising %s failed: %s\n",
                 s.root.c_str(), std::strerror(errno));
    return;
  }
  std::fprintf(stderr,
               "commit_order power-cut shim: %llu sync points, %s; %s is its durable image\n",
               static_cast<unsigned long long>(syncs),
               cut ? "power cut during the run" : "power cut at exit", s.root.c_str());
}

}  // namespace

// ---- the wrapped calls -------------------------------------------------------------------------

extern "C" {

int open(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = variadic_mode(flags, args);
  va_end(args);
  return open_common(real().open, AT_FDCWD, path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = variadic_mode(flags, args);
  va_end(args);
  return open_common(real().open64, AT_FDCWD, path, flags, mode);
}

int openat(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = variadic_mode(flags, args);
  va_end(args);
  return openat_common(real().openat, dirfd, path, flags, mode);
}

int openat64(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = variadic_mode(flags, args);
  va_end(args);
  return openat_common(real().openat64, dirfd, path, flags, mode);
}

int creat(const char* path, mode_t mode) {
  const int flags = O_CREAT | O_WRONLY | O_TRUNC;
  const bool created = state().active && will_create(AT_FDCWD, path, flags);
  return after_open(real().creat(path, mode), flags, created);
}

int creat64(const char* path, mode_t mode) {
  const int flags = O_CREAT | O_WRONLY | O_TRUNC;
  const bool created = state().active && will_create(AT_FDCWD, path, flags);
  return after_open(real().creat64(path, mode), flags, created);
}

// _FORTIFY_SOURCE's checked entry points: they never create (O_CREAT needs the mode argument).
int __open_2(const char* path, int flags) {
  return after_open(real().open_2(path, flags), flags, false);
}
int __open64_2(const char* path, int flags) {
  return after_open(real().open64_2(path, flags), flags, false);
}
int __openat_2(int dirfd, const char* path, int flags) {
  return after_open(real().openat_2(dirfd, path, flags), flags, false);
}
int __openat64_2(int dirfd, const char* path, int flags) {
  return after_open(real().openat64_2(dirfd, path, flags), flags, false);
}

int close(int fd) {
  {
    shim_state& s = state();
    std::lock_guard lock(s.mutex);
    s.descriptors.erase(fd);
  }
  return real().close(fd);
}

int fsync(int fd) {
  return sync_common(real().fsync, fd);
}

int fdatasync(int fd) {
  return sync_common(real().fdatasync, fd);
}

int mkdir(const char* path, mode_t mode) {
  return mkdir_common(real().mkdir(path, mode), AT_FDCWD, path);
}

int mkdirat(int dirfd, const char* path, mode_t mode) {
  return mkdir_common(real().mkdirat(dirfd, path, mode), dirfd, path);
}

// ---- control ---------------------------------------------------------------------------------

int commit_order_power_cut_reset(const char* root) {
  shim_state& s = state();
  std::lock_guard lock(s.mutex);
  return reset_locked(s, root);
}

void commit_order_power_cut_arm(unsigned long long at_sync) {
  shim_state& s = state();
  std::lock_guard lock(s.mutex);
  s.cut_at = at_sync;
}

unsigned long long commit_order_power_cut_syncs(void) {
  shim_state& s = state();
  std::lock_guard lock(s.mutex);
  return s.syncs;
}

int commit_order_power_cut_happened(void) {
  shim_state& s = state();
  std::lock_guard lock(s.mutex);
  return s.cut ? 1 : 0;
}

int commit_order_power_cut_materialise(unsigned long long tail_seed) {
  shim_state& s = state();
  std::lock_guard lock(s.mutex);
  return materialise_locked(s, tail_seed);
}

}  // extern "C"
