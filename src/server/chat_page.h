// The chat page served at `/`: chat_page.html, built into the binary (no file to install, nothing fetched from
// elsewhere), with the Content-Security-Policy that keeps the page's requests on this server.
#pragma once

#include <string_view>

namespace parallm::server {

// The page's HTML (chat_page.html, embedded at build time).
std::string_view ChatPageHtml();

// Same-origin requests only; the page's inline script and style are its own.
inline constexpr std::string_view kChatPageCsp =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'";

}  // namespace parallm::server
