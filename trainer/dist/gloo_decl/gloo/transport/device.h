// Declaration only; see README.md in the parent folder.
#pragma once

namespace gloo::transport {

class Device;         // created inside libtorch by ProcessGroupGloo::createDeviceFor*
class UnboundBuffer;  // held by unique_ptr in send/recv work objects we never create

}  // namespace gloo::transport
