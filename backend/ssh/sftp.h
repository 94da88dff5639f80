// SFTP helpers on an open SshSession: make directories, upload a file, read a remote file from a
// byte offset (how the launchers tail the ranks' event files), and resolve `~` remotely.
#pragma once

#include <cstdint>
#include <string>

#include "backend/ssh/sshsession.h"
#include "spec/result.h"

namespace shardscope::backend {

/// `mkdir -p` over SFTP (mode 0755 for new parent directories).
/// `leafMode`: the mode `path` itself is created with (a run directory: 0700); parents get 0755.
[[nodiscard]] Result<void> sftpMakeDirs(SshSession& session, const std::string& path,
                                        int leafMode = 0755);
/// Writes `data` to `path` (created or truncated) with permission bits `mode`.
[[nodiscard]] Result<void> sftpWriteFile(SshSession& session, const std::string& path,
                                         const std::string& data, int mode = 0644);
/// Up to maxBytes of `path` from byte `offset`; empty at end of file or when the file does not
/// exist yet (a rank that has not written anything).
[[nodiscard]] Result<std::string> sftpRead(SshSession& session, const std::string& path,
                                           std::int64_t offset, std::int64_t maxBytes);
/// The size of `path` in bytes, or -1 when it does not exist (an error only when the server
/// could not be asked).
[[nodiscard]] Result<std::int64_t> sftpStat(SshSession& session, const std::string& path);
/// The remote login directory (where SFTP starts).
[[nodiscard]] Result<std::string> sftpHome(SshSession& session);
/// `path` with a leading `~` or `~/` replaced by the remote home; relative paths are taken from
/// the home too. The result is absolute, so it can be quoted in shell commands safely.
[[nodiscard]] Result<std::string> sftpAbsolutePath(SshSession& session, const std::string& path);

}  // namespace shardscope::backend
