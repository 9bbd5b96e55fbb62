// Boost.Asio's compiled part, once for the whole library. Every unit is built with
// BOOST_ASIO_SEPARATE_COMPILATION (meson.build), so Asio's headers only declare its
// non-template functions (the scheduler, the epoll reactor, error categories, ...) and this
// unit defines them; programs that embed the library get the macro from pkg-config or
// agentctl_dep and use these (docs/TESTING.md, "Build cost").
#include <boost/asio/impl/src.hpp>
