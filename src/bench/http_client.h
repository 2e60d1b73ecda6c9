// A small HTTP/1.1 client on Boost.Beast for the online benchmark: plain GETs and streamed POSTs whose body
// arrives piece by piece (server-sent events), all as Asio coroutines, so hundreds of concurrent streams run on
// one thread. Every operation has an idle timeout: a silent server fails the request, it never hangs.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "util/status.h"

namespace parallm::bench {

// "http://host:port/prefix": where an OpenAI-compatible server listens. https is not supported.
struct BaseUrl {
  std::string host;
  std::string port = "80";
  std::string prefix;  // path prefix without a trailing '/', e.g. "" or "/proxy"
  std::string api_key;  // when set, sent as "Authorization: Bearer <key>" with every request
  std::string ToString() const { return "http://" + host + ":" + port + prefix; }
};
Result<BaseUrl> ParseBaseUrl(std::string_view url);

// How one HTTP exchange ended. `error` is empty when a response arrived (whatever its status).
struct HttpOutcome {
  int status = 0;     // HTTP status code; 0 when no response arrived
  std::string error;  // connection refused, timeout, connection reset mid-body, ...
  std::string body;   // the whole body when it was not streamed (non-2xx answers, GETs)
  bool ok() const { return error.empty() && status >= 200 && status < 300; }
  // One line for reports: the error, or "HTTP 500: <the OpenAI error message or the start of the body>".
  std::string Describe() const;
};

struct HttpRequest {
  std::string method = "GET";
  std::string target;  // path and query, prefix included
  std::string body;    // sent as application/json when not empty
  std::chrono::milliseconds idle_timeout{60000};  // longest wait for the connection, or any next bytes
};

// Runs `request` against `endpoints`. When `on_body` is set and the status is 2xx, the body is handed to it
// as it arrives (each call: the bytes one read produced, in order) instead of being stored in `body`.
boost::asio::awaitable<HttpOutcome> Fetch(const boost::asio::ip::tcp::resolver::results_type& endpoints,
                                          const BaseUrl& url, const HttpRequest& request,
                                          std::function<void(std::string_view)> on_body = {});

// A blocking GET (its own io_context), for set-up calls such as GET /v1/models.
HttpOutcome BlockingGet(const BaseUrl& url, const std::string& path, std::chrono::milliseconds timeout);

// Splits a server-sent-event stream into events: feed bytes as they come, take the `data:` payload of every
// complete event ("\n\n"- or "\r\n\r\n"-terminated; several data lines joined by '\n'). Comments and events
// without data are skipped.
class SseParser {
 public:
  std::vector<std::string> Feed(std::string_view bytes);

 private:
  std::string pending_;
};

}  // namespace parallm::bench
