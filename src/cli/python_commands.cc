// The `tessel` commands that live in the Python module: `compare` (tessel against onnxruntime or
// tessel's CPU reference; onnxruntime is a Python package) and `serve` (Triton Inference Server
// with the model bound to tessel sessions; Triton's Python backend runs them). Each hands its
// arguments to `python -m tessel <command>`, so that they are tessel commands like the others.
// The interpreter is $TESSEL_PYTHON, else python3 on PATH; a build tree's own module (build/python,
// built with -DTESSEL_PYTHON_MODULE=ON) comes first on its path.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "cli/commands.h"
#include "core/error.h"

namespace tessel::cli {
namespace {

// Imports the command's module or says, in one line, how to get it; then runs the command.
std::string launcher(const std::string& name) {
  return "import sys\n"
         "try:\n"
         "    from tessel." + name + " import main\n"
         "except ImportError as e:\n"
         "    sys.stderr.write('error: tessel " + name + " needs the tessel Python module (pip install "
         ". in the tessel source tree): %s\\n' % e)\n"
         "    sys.exit(2)\n"
         "sys.exit(main(sys.argv[1:]))\n";
}

Action add_python_command(CLI::App& app, const std::string& name, const std::string& help) {
  auto* cmd = app.add_subcommand(name, help);
  cmd->prefix_command();  // every argument, --help too, goes to the Python side
  cmd->set_help_flag();
  return [cmd, name]() {
    if (!cmd->parsed()) return -1;
    const char* env = std::getenv("TESSEL_PYTHON");
    const std::string python = env && *env ? env : "python3";
#ifdef TESSEL_BUILD_PYTHON_DIR
    if (std::filesystem::is_directory(TESSEL_BUILD_PYTHON_DIR "/tessel")) {
      const char* old = std::getenv("PYTHONPATH");
      std::string path = TESSEL_BUILD_PYTHON_DIR;
      if (old && *old) path += std::string(":") + old;
      setenv("PYTHONPATH", path.c_str(), 1);
    }
#endif
    std::vector<std::string> args = {python, "-c", launcher(name)};
    for (const std::string& a : cmd->remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    execvp(argv[0], argv.data());
    TESSEL_USER_ERROR() << "tessel " << name << " runs the Python module with " << python
                        << ", which does not start: " << std::strerror(errno)
                        << " (set TESSEL_PYTHON to a Python that has it)";
    return 2;
  };
}

}  // namespace

Action add_compare(CLI::App& app) {
  return add_python_command(
      app, "compare",
      "Compare tessel with onnxruntime or its CPU reference, per output and with --bisect per "
      "layer (the Python module's `python -m tessel compare`; see `tessel compare --help`)");
}

Action add_serve(CLI::App& app) {
  return add_python_command(
      app, "serve",
      "Serve a model through Triton Inference Server (KServe v2 HTTP/gRPC, dynamic batching, "
      "metrics), or --export-repo a Triton model repository (the Python module's "
      "`python -m tessel serve`; needs nvidia-pytriton: pip install .[serve]; see `tessel serve "
      "--help`)");
}

}  // namespace tessel::cli
