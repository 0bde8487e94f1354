// Narration Markdown (ui/markdown.hpp): what a student reads has no raw backticks or asterisks,
// code spans, bold, italic and list items are recognised, and snake_case names stay words.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "ui/markdown.hpp"

namespace dpscope::viz {
namespace {

TEST(Markdown, InlineCodeBoldAndItalicLoseTheirMarks) {
  const std::vector<MdBlock> blocks =
      parse_markdown("`model(x)` runs **every** layer, *in order*, and _then_ `loss.backward()`.");
  ASSERT_EQ(blocks.size(), 1u);
  const std::vector<MdRun>& r = blocks[0].runs;
  ASSERT_EQ(r.size(), 10u);
  EXPECT_EQ(r[0].style, MdStyle::kCode);
  EXPECT_EQ(r[0].text, "model(x)");
  EXPECT_EQ(r[2].style, MdStyle::kBold);
  EXPECT_EQ(r[2].text, "every");
  EXPECT_EQ(r[4].style, MdStyle::kItalic);
  EXPECT_EQ(r[4].text, "in order");
  EXPECT_EQ(r[6].style, MdStyle::kItalic);
  EXPECT_EQ(r[6].text, "then");
  EXPECT_EQ(r[8].style, MdStyle::kCode);
  EXPECT_EQ(r[8].text, "loss.backward()");
  EXPECT_EQ(markdown_plain_text("`x.to(device)` copies **x**"), "x.to(device) copies x");
}

TEST(Markdown, WrappedLinesJoinAndBlankLinesAndListsStartBlocks) {
  const std::vector<MdBlock> blocks = parse_markdown(
      "The batch is split\ninto four.\n\n- rank 0 gets rows 0-63\n- rank 1 gets\n  rows 64-127\n2. then "
      "backward");
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[0].kind, MdBlock::Kind::kParagraph);
  EXPECT_EQ(markdown_plain_text("The batch is split\ninto four."), "The batch is split into four.");
  EXPECT_EQ(blocks[1].kind, MdBlock::Kind::kBullet);
  EXPECT_EQ(blocks[2].kind, MdBlock::Kind::kBullet);
  ASSERT_EQ(blocks[2].runs.size(), 1u);
  EXPECT_EQ(blocks[2].runs[0].text, "rank 1 gets rows 64-127");
  EXPECT_EQ(blocks[3].kind, MdBlock::Kind::kNumbered);
  EXPECT_EQ(blocks[3].marker, "2.");
}

TEST(Markdown, SnakeCaseProductsAndUnclosedMarksStayLiteral) {
  EXPECT_EQ(markdown_plain_text("a grad_ready marker for param_3"), "a grad_ready marker for param_3");
  EXPECT_EQ(markdown_plain_text("w = w - lr * grad, 2 * 3"), "w = w - lr * grad, 2 * 3");
  EXPECT_EQ(markdown_plain_text("a lone ` backtick"), "a lone ` backtick");
  EXPECT_EQ(markdown_plain_text("**"), "**");
}

// Every narration, question and explanation of the course, as the lessons ship: what a student reads
// after rendering has no backtick and no "**" left (an unmatched mark would reach the screen raw).
TEST(Markdown, NoLessonTextShowsRawMarks) {
  const std::filesystem::path dir = std::filesystem::path(DPSCOPE_SOURCE_DIR) / "lessons";
  // narration = """...""" and prompt / explain / title = "..." (TOML basic strings, no escapes used).
  const std::regex block(R"re((narration|prompt|explain)\s*=\s*(?:"""([\s\S]*?)"""|"([^"\n]*)"))re");
  size_t texts = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    std::ifstream in(entry.path());
    std::stringstream all;
    all << in.rdbuf();
    const std::string toml = all.str();
    for (std::sregex_iterator m(toml.begin(), toml.end(), block), end; m != end; ++m) {
      const std::string text = (*m)[2].matched ? (*m)[2].str() : (*m)[3].str();
      const std::string shown = markdown_plain_text(text);
      EXPECT_EQ(shown.find('`'), std::string::npos) << entry.path().filename() << ": " << shown;
      EXPECT_EQ(shown.find("**"), std::string::npos) << entry.path().filename() << ": " << shown;
      ++texts;
    }
  }
  EXPECT_GT(texts, 100u) << "the course's texts were found";
}

}  // namespace
}  // namespace dpscope::viz
