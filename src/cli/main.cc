// The `tessel` command. User errors print as one "error: ..." line and exit with code 2;
// compiler bugs print "internal error: ..." and exit with code 3. Never a signal.
#include <cstdio>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "runtime/engine_plan.h"

int main(int argc, char** argv) {
  CLI::App app{"tessel: an inference compiler for convolutional networks on Tensor Cores"};
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       std::string("tessel ") + tessel::runtime::kTesselVersion);
  std::vector<tessel::cli::Action> actions = {
      tessel::cli::add_inspect(app),
      tessel::cli::add_run(app),
      tessel::cli::add_opt(app),
      tessel::cli::add_bench_op(app),
      tessel::cli::add_codegen(app),
      tessel::cli::add_explain(app),
      tessel::cli::add_predict(app),
      tessel::cli::add_tune(app),
      tessel::cli::add_compile(app),
      tessel::cli::add_bench(app),
      tessel::cli::add_profile(app),
      tessel::cli::add_quantize(app),
      tessel::cli::add_compare(app),
      tessel::cli::add_serve(app),
  };
  // CLI11 reports an unknown first word as "a subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      found |= sub->get_name() == argv[1];
    }
    if (!found) {
      std::fprintf(stderr, "error: unknown command '%s' (commands: %s)\n", argv[1], known.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s (see --help)\n", e.what());
    return 2;
  }
  try {
    for (auto& action : actions) {
      int rc = action();
      if (rc >= 0) return rc;
    }
    return 0;
  } catch (const tessel::UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const tessel::InternalError& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 3;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 3;
  }
}
