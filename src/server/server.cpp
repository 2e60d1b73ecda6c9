// RunServer: the acceptor, the loader thread (running the caller's ModelLoader), signals and the shutdown sequence
// around ApiServer.
#include "server/server.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "server/api_server.h"

namespace parallm::server {
namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

void Say(const std::string& line) {
  std::fprintf(stdout, "parallm: %s\n", line.c_str());
  std::fflush(stdout);
}

void Accept(tcp::acceptor& acceptor, ApiServer& api, const HttpLimits& limits) {
  acceptor.async_accept([&acceptor, &api, &limits](error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;  // closed for shutdown
    if (!ec) std::make_shared<HttpSession>(std::move(socket), api, limits)->Start();
    Accept(acceptor, api, limits);
  });
}

}  // namespace

int RunServer(const ServerOptions& o, ModelLoader load) {
  Say(fmt::format("loading {} ...", o.model_root));
  asio::io_context io(1);
  ApiConfig config;
  config.served_model_name = o.served_model_name.empty() ? o.model_root : o.served_model_name;
  config.model_root = o.model_root;
  config.api_key = o.api_key;
  ApiServer api(io, config, o.parse_threads);

  tcp::acceptor acceptor(io);
  {
    error_code ec;
    const auto address = asio::ip::make_address(o.host, ec);
    if (ec) {
      std::fprintf(stderr, "error: --host %s is not an IP address\n", o.host.c_str());
      return 1;
    }
    tcp::endpoint endpoint(address, static_cast<uint16_t>(o.port));
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      std::fprintf(stderr, "error: cannot listen on %s:%d: %s\n", o.host.c_str(), o.port, ec.message().c_str());
      return 1;
    }
  }
  const auto bound = acceptor.local_endpoint();
  const std::string host = bound.address().is_v6() ? "[" + bound.address().to_string() + "]" : bound.address().to_string();
  Say(fmt::format("listening on http://{}:{}", host, bound.port()));
  Accept(acceptor, api, o.limits);

  int exit_code = 0;
  std::shared_ptr<AsyncEngine> engine;  // written by the loader, read after it is joined or via io posts
  std::thread loader([&] {
    auto served = load();
    if (!served.ok()) {
      std::fprintf(stderr, "error: %s\n", served.status().message().c_str());
      asio::post(io, [&] { exit_code = 1; io.stop(); });
      return;
    }
    auto e = served->engine;
    auto shared_text = served->text;
    auto loras = served->loras;
    engine = e;
    asio::post(io, [&api, e, shared_text, loras, parser = served->tool_parser, auto_choice = served->auto_tool_choice] {
      api.SetEngine(e, shared_text, loras, parser, auto_choice);
      const EngineConfig& c = e->engine_config();
      Say(fmt::format("model ready ({} KV blocks of {} tokens in {}, context {}, up to {} running requests)",
                      c.num_kv_blocks, c.block_size, KvDtypeName(*c.kv_cache_dtype), c.scheduler.max_model_len,
                      c.scheduler.max_num_seqs));
    });
  });

  // Shutdown: stop accepting, let the engine finish what it has (up to the grace period), let the last answers
  // reach their clients, then leave the io loop.
  std::thread drainer;
  asio::steady_timer flush_timer(io);
  auto flush_deadline = std::chrono::steady_clock::now();
  std::function<void()> wait_for_calls = [&] {
    if (api.num_active_calls() == 0 || std::chrono::steady_clock::now() > flush_deadline) {
      // The last bytes of finished answers are queued; give the writes a moment.
      flush_timer.expires_after(std::chrono::milliseconds(200));
      flush_timer.async_wait([&](error_code) { io.stop(); });
      return;
    }
    flush_timer.expires_after(std::chrono::milliseconds(20));
    flush_timer.async_wait([&](error_code ec) {
      if (!ec) wait_for_calls();
    });
  };
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](error_code ec, int signal) {
    if (ec) return;
    Say(fmt::format("{} received: no new connections; finishing running requests (grace {} s)",
                    signal == SIGINT ? "SIGINT" : "SIGTERM", o.shutdown_grace_seconds));
    error_code ignored;
    acceptor.close(ignored);
    api.BeginShutdown();
    // A second signal does not wait for the grace period.
    signals.async_wait([&](error_code ec2, int) {
      if (ec2) return;
      Say("second signal: exiting now");
      std::_Exit(1);
    });
    drainer = std::thread([&] {
      loader.join();
      const int32_t cancelled = engine ? engine->Drain(o.shutdown_grace_seconds) : 0;
      asio::post(io, [&, cancelled] {
        if (cancelled > 0) Say(fmt::format("cancelled {} requests still running after the grace period", cancelled));
        flush_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        wait_for_calls();
      });
    });
  });

  io.run();
  if (drainer.joinable()) drainer.join();
  if (loader.joinable()) loader.join();
  if (exit_code == 0) Say("shut down");
  return exit_code;
}

}  // namespace parallm::server
