// Lessons: the learning path (lessons/NN-slug.md) and the exercises `flashlab lesson N` grades.
//
// The path is 14 lessons in four phases; path() lists them all, written or not. A lesson that is
// written has a file lessons/NN-slug.md and a function lesson_NN() (lesson_NN.cpp) returning its
// Lesson: its slug, its exercises and, optionally, the visualizer arguments of `flashlab viz --lesson N`.
// registry.cpp registers the written ones, one line each; a lesson not written yet is not registered.
//
// An exercise's answer is recomputed with the library (schedule, simulator, problem) every time it is
// asked for, never stored: when the model changes, the graded answer follows it.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace flashlab::lessons {

// The library's answer to one exercise.
struct Answer {
  double value = 0;
  std::string unit;                 // "FLOP/byte", "MB", "" for a plain count
  double rel_tolerance = 0;         // right when |given - value| <= max(abs_tolerance, rel_tolerance * |value|)
  double abs_tolerance = 0;
  std::string working;              // how the value follows, step by step; printed when an answer is wrong
};

struct Exercise {
  std::string prompt;               // the question, as `flashlab lesson N` prints it
  std::function<Answer()> answer;
};

struct Lesson {
  int number = 0;
  std::string slug;                 // the file is lessons/NN-slug.md
  std::vector<Exercise> exercises;  // at least one
  std::vector<std::string> viz;     // flashlab-viz arguments for `flashlab viz --lesson N`; empty: none
};

// One step of the path: its place, phase, title and reading time, whether or not it is written.
struct PathStep {
  int number;
  int phase;
  const char* title;
  int minutes;
};

const std::vector<PathStep>& path();              // all 14, in order
const std::vector<Lesson>& written();             // the registered lessons, in order
const Lesson* find(int number);                   // nullptr when lesson `number` is not written yet
const PathStep& step(int number);                 // throws flashlab::Error outside 1..path().size()
std::string file_of(const Lesson& lesson);        // "lessons/01-attention-is-memory-bound.md"

bool is_right(const Answer& answer, double given);
double tolerance_of(const Answer& answer);        // the absolute tolerance the rule gives
std::string describe_tolerance(const Answer& answer);  // "within 2%" or "within 0.5 FLOP/byte"

// One function per written lesson (lesson_NN.cpp).
Lesson lesson_01();
Lesson lesson_02();
Lesson lesson_03();
Lesson lesson_04();
Lesson lesson_05();
Lesson lesson_06();
Lesson lesson_07();
Lesson lesson_08();
Lesson lesson_09();
Lesson lesson_10();
Lesson lesson_11();
Lesson lesson_12();
Lesson lesson_13();
Lesson lesson_14();

}  // namespace flashlab::lessons
