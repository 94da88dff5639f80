#include "backend/ssh/sftp.h"

#include <fcntl.h>

#include <utility>

namespace shardscope::backend {

namespace {

std::string sftpError(SshSession& session, sftp_session sftp) {
  const int code = sftp_get_error(sftp);
  std::string text = ssh_get_error(session.handle());
  if (text.empty()) text = "SFTP error " + std::to_string(code);
  switch (code) {
    case SSH_FX_PERMISSION_DENIED:
      return "permission denied (" + text + ")";
    case SSH_FX_NO_SUCH_FILE:
      return "no such file or directory (" + text + ")";
    case SSH_FX_FAILURE:
      return "the server reported a failure, e.g. a full disk (" + text + ")";
    default:
      return text;
  }
}

struct FileCloser {
  sftp_file file;
  ~FileCloser() {
    if (file) sftp_close(file);
  }
};

}  // namespace

Result<void> sftpMakeDirs(SshSession& session, const std::string& path, int leafMode) {
  auto sftp = session.sftp();
  if (!sftp) return sftp.error();
  std::string prefix;
  size_t pos = 0;
  while (pos <= path.size()) {
    const size_t slash = path.find('/', pos);
    const size_t end = slash == std::string::npos ? path.size() : slash;
    prefix = path.substr(0, end);
    pos = end + 1;
    if (prefix.empty() || prefix == "." || prefix == "~") continue;
    const bool leaf = end == path.size();
    if (sftp_mkdir(*sftp, prefix.c_str(), leaf ? leafMode : 0755) == SSH_OK) continue;
    const int code = sftp_get_error(*sftp);
    if (code == SSH_FX_FILE_ALREADY_EXISTS || code == SSH_FX_FAILURE) {
      // FAILURE is what OpenSSH's server returns for an existing directory.
      sftp_attributes attrs = sftp_stat(*sftp, prefix.c_str());
      const bool isDir = attrs && attrs->type == SSH_FILEXFER_TYPE_DIRECTORY;
      if (attrs) sftp_attributes_free(attrs);
      if (isDir) continue;
    }
    return fail(session.displayName() + ": cannot create the remote directory " + prefix + ": " +
                sftpError(session, *sftp) + ". Check launch.remote_dir and its permissions.");
  }
  return ok();
}

Result<void> sftpWriteFile(SshSession& session, const std::string& path, const std::string& data,
                           int mode) {
  auto sftp = session.sftp();
  if (!sftp) return sftp.error();
  FileCloser file{sftp_open(*sftp, path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, mode)};
  if (!file.file) {
    return fail(session.displayName() + ": cannot create " + path + ": " +
                sftpError(session, *sftp));
  }
  // The mode of open() applies to a new file only (and the server's umask may narrow it): a file
  // that was there keeps its bits, so they are set before the data (a secret) is written.
  if (sftp_chmod(*sftp, path.c_str(), static_cast<mode_t>(mode)) < 0) {
    return fail(session.displayName() + ": cannot set the mode of " + path + ": " +
                sftpError(session, *sftp));
  }
  size_t written = 0;
  while (written < data.size()) {
    const size_t chunk = std::min<size_t>(data.size() - written, 32768);
    const ssize_t n = sftp_write(file.file, data.data() + written, chunk);
    if (n <= 0) {
      return fail(session.displayName() + ": writing " + path +
                  " failed: " + sftpError(session, *sftp));
    }
    written += static_cast<size_t>(n);
  }
  return ok();
}

Result<std::string> sftpRead(SshSession& session, const std::string& path, std::int64_t offset,
                             std::int64_t maxBytes) {
  if (offset < 0 || maxBytes < 0) {
    return fail("sftpRead " + path + ": offset and maxBytes must be >= 0");
  }
  auto sftp = session.sftp();
  if (!sftp) return sftp.error();
  FileCloser file{sftp_open(*sftp, path.c_str(), O_RDONLY, 0)};
  if (!file.file) {
    if (sftp_get_error(*sftp) == SSH_FX_NO_SUCH_FILE && session.isConnected()) {
      return std::string();
    }
    return fail(session.displayName() + ": cannot open " + path + ": " + sftpError(session, *sftp));
  }
  if (sftp_seek64(file.file, static_cast<uint64_t>(offset)) != 0) {
    return fail(session.displayName() + ": cannot seek in " + path);
  }
  std::string data;
  char buffer[32768];
  while (static_cast<std::int64_t>(data.size()) < maxBytes) {
    const size_t want =
        std::min<std::int64_t>(sizeof buffer, maxBytes - static_cast<std::int64_t>(data.size()));
    const ssize_t n = sftp_read(file.file, buffer, want);
    if (n < 0) {
      return fail(session.displayName() + ": reading " + path +
                  " failed: " + sftpError(session, *sftp));
    }
    if (n == 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  return data;
}

Result<std::int64_t> sftpStat(SshSession& session, const std::string& path) {
  auto sftp = session.sftp();
  if (!sftp) return sftp.error();
  sftp_attributes attributes = sftp_stat(*sftp, path.c_str());
  if (attributes == nullptr) {
    if (sftp_get_error(*sftp) == SSH_FX_NO_SUCH_FILE && session.isConnected()) return -1;
    return fail(session.displayName() + ": cannot stat " + path + ": " + sftpError(session, *sftp));
  }
  const auto size = static_cast<std::int64_t>(attributes->size);
  sftp_attributes_free(attributes);
  return size;
}

Result<std::string> sftpHome(SshSession& session) {
  auto sftp = session.sftp();
  if (!sftp) return sftp.error();
  char* home = sftp_canonicalize_path(*sftp, ".");
  if (!home) {
    return fail(session.displayName() +
                ": cannot resolve the remote home directory: " + sftpError(session, *sftp));
  }
  std::string text(home);
  ssh_string_free_char(home);
  return text;
}

Result<std::string> sftpAbsolutePath(SshSession& session, const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  auto home = sftpHome(session);
  if (!home) return home;
  if (path.empty() || path == "~") return *home;
  if (path.rfind("~/", 0) == 0) return *home + path.substr(1);
  return *home + "/" + path;
}

}  // namespace shardscope::backend
