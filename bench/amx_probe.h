// The AMX probe microbenchmarks (AmxProbe/...): see amx_probe.cpp.
#pragma once

namespace parallm {

// Registers AmxProbe/{tiles,tails,tiles+tails,interleaved} when this CPU and OS allow AMX; nothing otherwise.
void RegisterAmxProbe();

}  // namespace parallm
