// Placeholder so the planner library has a translation unit until its sources land.
namespace flotilla::planner {}
