// Prometheus text exposition (format 0.0.4) of EngineMetrics under vLLM's metric names, every sample labelled
// model_name, so routers and dashboards built for vLLM read parallm unchanged.
#pragma once

#include <string>

#include "engine/engine_metrics.h"

namespace parallm::server {

// The whole /metrics page. request_success_total always lists finished_reason "stop", "length" and "abort"
// (the engine's "cancelled" is vLLM's "abort").
std::string RenderPrometheus(const EngineMetrics& metrics, const std::string& model_name);

// A label value with \, " and newline escaped as the format requires.
std::string EscapeLabelValue(const std::string& value);

}  // namespace parallm::server
