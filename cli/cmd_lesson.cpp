// flashlab lesson: the learning path (lessons/). `lesson` lists the 14 lessons and which are written;
// `lesson N` prints lesson N's title, file and exercises; `lesson N --answer X` grades an answer
// against the value the library computes now (lessons/exercises/), with the working when it is wrong.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flashlab/error.hpp"
#include "flashlab/format.hpp"
#include "lesson.hpp"

namespace flashlab::cli {
namespace {

const char* kPhases[] = {"", "why attention bleeds memory before it bleeds math",
                         "tiling and online softmax on graph paper", "FA1 vs FA2 vs FA3: same math, better schedule",
                         "predict"};

void print_list(bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const lessons::PathStep& s : lessons::path()) {
      const lessons::Lesson* l = lessons::find(s.number);
      out.push_back({{"number", s.number},
                     {"phase", s.phase},
                     {"title", s.title},
                     {"minutes", s.minutes},
                     {"written", l != nullptr},
                     {"file", l ? lessons::file_of(*l) : ""},
                     {"exercises", l ? l->exercises.size() : 0},
                     {"viz", l != nullptr && !l->viz.empty()}});
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  int phase = 0;
  for (const lessons::PathStep& s : lessons::path()) {
    if (s.phase != phase) std::printf("%sPhase %d: %s\n", phase ? "\n" : "", s.phase, kPhases[s.phase]);
    phase = s.phase;
    const lessons::Lesson* l = lessons::find(s.number);
    std::printf("  %2d  %-56s %2d min  %s\n", s.number, s.title, s.minutes,
                l ? lessons::file_of(*l).c_str() : "(not written yet)");
  }
  std::printf("\nflashlab lesson N: a lesson's exercises; flashlab lesson N --answer X: grade your answer\n");
}

const lessons::Lesson& written_lesson(int number) {
  const lessons::PathStep& s = lessons::step(number);  // throws outside the path
  const lessons::Lesson* l = lessons::find(number);
  if (!l) {
    std::string have;
    for (const lessons::Lesson& w : lessons::written()) have += (have.empty() ? "" : ", ") + std::to_string(w.number);
    throw Error("lesson " + std::to_string(number) + " (\"" + s.title + "\") is not written yet; written: " + have +
                " (flashlab lesson --list)");
  }
  return *l;
}

void print_lesson(const lessons::Lesson& l) {
  const lessons::PathStep& s = lessons::step(l.number);
  std::printf("Lesson %d: %s  (phase %d, %d minutes)\n", l.number, s.title, s.phase, s.minutes);
  std::printf("read: %s\n\n", lessons::file_of(l).c_str());
  for (size_t k = 0; k < l.exercises.size(); ++k) {
    std::printf("Exercise %zu\n%s\n", k + 1, l.exercises[k].prompt.c_str());
    std::printf("  answer with: flashlab lesson %d%s --answer VALUE\n\n", l.number,
                l.exercises.size() > 1 ? (" --exercise " + std::to_string(k + 1)).c_str() : "");
  }
  if (!l.viz.empty()) std::printf("watch it: flashlab viz --lesson %d\n", l.number);
}

double parse_answer(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v))
    throw Error("--answer: '" + text + "' is not a number (expected a plain number such as 30.1, 384 or 2.6e8, "
                "in the unit the exercise asks for)");
  return v;
}

// Grades `given`; prints right or wrong, and the working when wrong. Returns whether it was right.
bool grade(const lessons::Lesson& l, std::optional<int> asked, const std::string& given_text) {
  const int count = static_cast<int>(l.exercises.size());
  if (!asked && count > 1)
    throw Error("lesson " + std::to_string(l.number) + " has " + std::to_string(count) +
                " exercises: say which with --exercise 1.." + std::to_string(count));
  const int exercise = asked.value_or(1);
  if (exercise < 1 || exercise > count)
    throw Error("--exercise " + std::to_string(exercise) + ": lesson " + std::to_string(l.number) + " has exercise" +
                (count > 1 ? "s 1.." + std::to_string(count) : " 1 only"));
  const double given = parse_answer(given_text);
  const lessons::Answer a = l.exercises[exercise - 1].answer();
  const std::string unit = a.unit.empty() ? "" : " " + a.unit;
  if (lessons::is_right(a, given)) {
    std::printf("right: %s%s (the library computes %s%s; %s)\n", given_text.c_str(), unit.c_str(),
                format_number(a.value, 6).c_str(), unit.c_str(), lessons::describe_tolerance(a).c_str());
    return true;
  }
  std::printf("wrong: %s%s is not %s of the answer.\nThe working:\n%s\n", given_text.c_str(), unit.c_str(),
              lessons::describe_tolerance(a).c_str(), a.working.c_str());
  return false;
}

}  // namespace

void add_lesson(CLI::App& app) {
  struct Opts {
    int number = 0, exercise = 0;
    std::string answer, format = "table";
    bool list = false;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("lesson", "the learning path (lessons/): list the lessons, print a lesson's "
                                           "exercises, grade your answer against the library's");
  cmd->footer("Example: flashlab lesson              (the path: 14 lessons and which are written)\n"
              "         flashlab lesson 1            (its title, file and exercises)\n"
              "         flashlab lesson 1 --exercise 2 --answer 200\n"
              "Exit status: 0 right (or a listing), 1 wrong, or a bad lesson, exercise or answer.");
  cmd->add_option("number", opts->number, "lesson number, 1..14");
  cmd->add_option("--answer", opts->answer, "your answer, a plain number in the exercise's unit");
  cmd->add_option("--exercise", opts->exercise, "which exercise, when the lesson has more than one");
  cmd->add_flag("--list", opts->list, "list the lessons with their state (the default without a number)");
  cmd->add_option("--format", opts->format, "table | json (the listing)")->capture_default_str()->check(
      CLI::IsMember({"table", "json"}));
  cmd->callback([opts, cmd] {
    if (opts->list || !cmd->count("number")) {
      if (cmd->count("--answer") || cmd->count("--exercise"))
        throw Error("--answer and --exercise need a lesson number: flashlab lesson N --answer VALUE");
      print_list(opts->format == "json");
      return;
    }
    if (opts->format == "json") throw Error("--format json is for the listing: flashlab lesson --list --format json");
    const lessons::Lesson& l = written_lesson(opts->number);
    if (!cmd->count("--answer")) {
      if (cmd->count("--exercise")) throw Error("--exercise needs --answer VALUE");
      print_lesson(l);
      return;
    }
    const std::optional<int> exercise = cmd->count("--exercise") ? std::optional<int>(opts->exercise) : std::nullopt;
    if (!grade(l, exercise, opts->answer)) throw CLI::RuntimeError(1);
  });
}

}  // namespace flashlab::cli
