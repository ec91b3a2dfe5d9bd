// The path (all 14 lessons, from issue 14) and the lessons written so far, one line each.
// To add lesson NN: write lessons/NN-slug.md and lessons/exercises/lesson_NN.cpp, declare lesson_NN()
// in lesson.hpp, add it to written() below and the .cpp to lessons/CMakeLists.txt (lessons/FORMAT.md).
#include <cstdio>

#include "flashlab/error.hpp"
#include "lesson.hpp"

namespace flashlab::lessons {

const std::vector<PathStep>& path() {
  static const std::vector<PathStep> steps = {
      // Phase 1: why attention bleeds memory before it bleeds math
      {1, 1, "Attention isn't slow, its memory traffic is", 7},
      {2, 1, "SRAM is the scratchpad nobody used", 6},
      {3, 1, "The N x N matrix that never had to exist", 7},
      {4, 1, "Same math, completely different schedule", 8},
      // Phase 2: tiling and online softmax on graph paper
      {5, 2, "Cut the matrix until it fits in your scratchpad", 7},
      {6, 2, "The running-max trick that streams softmax exactly", 7},
      {7, 2, "Walk one Q tile through every K tile on paper", 8},
      {8, 2, "The backward pass that never stored the matrix", 8},
      {9, 2, "Causal masking that doesn't waste tiles", 6},
      // Phase 3: FA1 vs FA2 vs FA3, same math, better schedule
      {10, 3, "FA2 flipped the loop and doubled the speedup", 7},
      {11, 3, "FA3 stops waiting for memory and starts overlapping it", 8},
      {12, 3, "Your team turned on FA: which version is running?", 7},
      {13, 3, "PyTorch SDPA, xFormers and the FA family tree", 6},
      // Phase 4: predict
      {14, 4, "Draw the roofline; predict FA's win for your sequence", 8},
  };
  return steps;
}

const std::vector<Lesson>& written() {
  static const std::vector<Lesson> lessons = {
      lesson_01(),
      lesson_02(),
      lesson_03(),
      lesson_04(),
      lesson_05(),
      lesson_06(),
      lesson_07(),
      lesson_08(),
      lesson_09(),
      lesson_10(),
      lesson_11(),
      lesson_12(),
      lesson_13(),
      lesson_14(),
  };
  return lessons;
}

const Lesson* find(int number) {
  for (const Lesson& l : written())
    if (l.number == number) return &l;
  return nullptr;
}

const PathStep& step(int number) {
  const auto& p = path();
  if (number < 1 || number > static_cast<int>(p.size()))
    throw Error("there is no lesson " + std::to_string(number) + ": the path has lessons 1 to " +
                std::to_string(p.size()) + " (flashlab lesson --list)");
  return p[number - 1];
}

std::string file_of(const Lesson& lesson) {
  char nn[8];
  std::snprintf(nn, sizeof nn, "%02d", lesson.number);
  return "lessons/" + std::string(nn) + "-" + lesson.slug + ".md";
}

}  // namespace flashlab::lessons
